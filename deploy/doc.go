// Package deploy is the home of flatline's deployment artefacts (the Helm
// chart under helm/, the Prometheus rules and Grafana dashboard, see
// README.md). Its one piece of code hands the alert rules to the tests that
// check them (Rules). Its own tests render the chart with helm and check the
// manifests against what flatline itself accepts: the rendered flatline.yaml
// must load with the configs package, the grace period must outlast
// shutdown_timeout, the PrometheusRule must be alerts.yml.
package deploy
