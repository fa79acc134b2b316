//go:build tools

// Package tools keeps the etcd main package in the module graph.
package tools

import _ "go.etcd.io/etcd/server/v3"
