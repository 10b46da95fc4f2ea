// Command kube-apiserver is gkq's build recipe for the upstream Kubernetes API server,
// used only by the integration-test control plane (tools/controlplane.sh).
// It mirrors upstream cmd/kube-apiserver/apiserver.go; all code comes from the
// modules pinned in go.mod.
package main

import (
	"os"
	_ "time/tzdata" // for timeZone support in CronJob

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
