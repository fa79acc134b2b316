//go:build tools

// Package tools keeps the helm main package in the module graph.
package tools

import _ "helm.sh/helm/v3/cmd/helm"
