//go:build tools

// Package tools keeps the binaries' packages in the module graph.
package tools

import (
	_ "k8s.io/kubernetes/test/e2e"
	_ "k8s.io/kubernetes/test/e2e/storage/external"
	_ "k8s.io/kubernetes/test/images/agnhost"
	_ "github.com/onsi/ginkgo/v2/ginkgo"
)
