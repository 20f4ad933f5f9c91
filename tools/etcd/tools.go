//go:build tools

// Package tools records the one package this module builds, so that
// `go mod tidy` keeps its requirements.
package tools

import _ "go.etcd.io/etcd/server/v3"
