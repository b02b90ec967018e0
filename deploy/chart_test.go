package deploy_test

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/flatline-dev/flatline/configs"
	"github.com/flatline-dev/flatline/deploy"
	"github.com/flatline-dev/flatline/internal/testenv"
)

const (
	chartDir   = "helm/flatline"
	configPath = "/etc/flatline/flatline.yaml"
)

// helmBinary is the repository's bin/helm (make bin/helm), else helm on
// PATH. Without one the chart tests skip, except in CI, which must run them.
func helmBinary(t *testing.T) string {
	t.Helper()
	if p, err := filepath.Abs("../bin/helm"); err == nil {
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p
		}
	}
	if p, err := exec.LookPath("helm"); err == nil {
		return p
	}
	if testenv.InCI() {
		t.Fatal("helm not found (neither bin/helm nor on PATH): CI must render the chart; make bin/helm builds it")
	}
	t.Skip("helm not found (neither bin/helm nor on PATH): make bin/helm builds it")
	return ""
}

// The parts of the rendered manifests the tests look at.
type (
	manifest struct {
		Kind     string `yaml:"kind"`
		Metadata struct {
			Name string `yaml:"name"`
		} `yaml:"metadata"`
		raw []byte
	}
	deployment struct {
		Spec struct {
			Selector struct {
				MatchLabels map[string]string `yaml:"matchLabels"`
			} `yaml:"selector"`
			Template struct {
				Metadata struct {
					Labels map[string]string `yaml:"labels"`
				} `yaml:"metadata"`
				Spec podSpec `yaml:"spec"`
			} `yaml:"template"`
		} `yaml:"spec"`
	}
	podSpec struct {
		TerminationGracePeriodSeconds *int64 `yaml:"terminationGracePeriodSeconds"`
		EnableServiceLinks            *bool  `yaml:"enableServiceLinks"`
		SecurityContext               struct {
			RunAsNonRoot   *bool  `yaml:"runAsNonRoot"`
			RunAsUser      *int64 `yaml:"runAsUser"`
			SeccompProfile struct {
				Type string `yaml:"type"`
			} `yaml:"seccompProfile"`
		} `yaml:"securityContext"`
		Containers []container `yaml:"containers"`
		Volumes    []volume    `yaml:"volumes"`
		Affinity   *struct {
			PodAntiAffinity *struct {
				Preferred []struct {
					Weight          int          `yaml:"weight"`
					PodAffinityTerm affinityTerm `yaml:"podAffinityTerm"`
				} `yaml:"preferredDuringSchedulingIgnoredDuringExecution"`
				Required []affinityTerm `yaml:"requiredDuringSchedulingIgnoredDuringExecution"`
			} `yaml:"podAntiAffinity"`
		} `yaml:"affinity"`
	}
	volume struct {
		Name      string `yaml:"name"`
		ConfigMap *struct {
			Name string `yaml:"name"`
		} `yaml:"configMap"`
		Secret *struct {
			SecretName string `yaml:"secretName"`
		} `yaml:"secret"`
		Projected *struct {
			Sources []struct {
				Secret *struct {
					Name  string `yaml:"name"`
					Items []struct {
						Key  string `yaml:"key"`
						Path string `yaml:"path"`
					} `yaml:"items"`
				} `yaml:"secret"`
			} `yaml:"sources"`
		} `yaml:"projected"`
	}
	affinityTerm struct {
		TopologyKey   string `yaml:"topologyKey"`
		LabelSelector struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"labelSelector"`
	}
	container struct {
		Name    string   `yaml:"name"`
		Command []string `yaml:"command"`
		Args    []string `yaml:"args"`
		Ports   []struct {
			Name          string `yaml:"name"`
			ContainerPort int    `yaml:"containerPort"`
		} `yaml:"ports"`
		Env []struct {
			Name      string `yaml:"name"`
			Value     string `yaml:"value"`
			ValueFrom *struct {
				SecretKeyRef *struct {
					Name string `yaml:"name"`
					Key  string `yaml:"key"`
				} `yaml:"secretKeyRef"`
			} `yaml:"valueFrom"`
		} `yaml:"env"`
		LivenessProbe   probe `yaml:"livenessProbe"`
		ReadinessProbe  probe `yaml:"readinessProbe"`
		SecurityContext struct {
			RunAsNonRoot             *bool `yaml:"runAsNonRoot"`
			AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
			ReadOnlyRootFilesystem   *bool `yaml:"readOnlyRootFilesystem"`
			Capabilities             struct {
				Drop []string `yaml:"drop"`
			} `yaml:"capabilities"`
		} `yaml:"securityContext"`
		VolumeMounts []struct {
			Name      string `yaml:"name"`
			MountPath string `yaml:"mountPath"`
			SubPath   string `yaml:"subPath"`
			ReadOnly  bool   `yaml:"readOnly"`
		} `yaml:"volumeMounts"`
	}
	probe struct {
		HTTPGet *struct {
			Path        string `yaml:"path"`
			Port        any    `yaml:"port"` // a port name or number
			Scheme      string `yaml:"scheme"`
			HTTPHeaders []struct {
				Name  string `yaml:"name"`
				Value string `yaml:"value"`
			} `yaml:"httpHeaders"`
		} `yaml:"httpGet"`
	}
	selectorSpec struct {
		Spec struct {
			Selector struct {
				MatchLabels map[string]string `yaml:"matchLabels"`
			} `yaml:"selector"`
		} `yaml:"spec"`
	}
)

// release is one rendering of the chart.
type release struct {
	t         *testing.T
	manifests []manifest
}

// render runs helm template on the chart with args (--set ...) and fails the
// test when helm does.
func render(t *testing.T, args ...string) release {
	t.Helper()
	out, err := helmTemplate(t, args...)
	if err != nil {
		t.Fatalf("helm template %s: %v", strings.Join(args, " "), err)
	}
	r := release{t: t}
	dec := yaml.NewDecoder(bytes.NewReader(out))
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("helm template output: %v", err)
		}
		if len(doc.Content) == 0 { // an empty document between two ---
			continue
		}
		raw, err := yaml.Marshal(&doc)
		if err != nil {
			t.Fatal(err)
		}
		m := manifest{raw: raw}
		if err := doc.Decode(&m); err != nil {
			t.Fatalf("manifest: %v", err)
		}
		r.manifests = append(r.manifests, m)
	}
	return r
}

func helmTemplate(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	cmd := exec.Command(helmBinary(t), append([]string{"template", "flatline", chartDir}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, errors.New(strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// decode decodes the one manifest of kind into v; ok is false when there is none.
func (r release) decode(kind string, v any) (ok bool) {
	r.t.Helper()
	var found []manifest
	for _, m := range r.manifests {
		if m.Kind == kind {
			found = append(found, m)
		}
	}
	switch len(found) {
	case 0:
		return false
	case 1:
		if err := yaml.Unmarshal(found[0].raw, v); err != nil {
			r.t.Fatalf("%s: %v", kind, err)
		}
		return true
	}
	r.t.Fatalf("%d manifests of kind %s, want one", len(found), kind)
	return false
}

func (r release) must(kind string, v any) {
	r.t.Helper()
	if !r.decode(kind, v) {
		r.t.Fatalf("no %s rendered", kind)
	}
}

func (r release) pod() podSpec {
	r.t.Helper()
	var d deployment
	r.must("Deployment", &d)
	return d.Spec.Template.Spec
}

func (r release) container() container {
	r.t.Helper()
	pod := r.pod()
	if len(pod.Containers) != 1 {
		r.t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	return pod.Containers[0]
}

// configText is the ConfigMap's flatline.yaml.
func (r release) configText() string {
	r.t.Helper()
	var cm struct {
		Data map[string]string `yaml:"data"`
	}
	r.must("ConfigMap", &cm)
	text, ok := cm.Data[filepath.Base(configPath)]
	if !ok {
		r.t.Fatalf("ConfigMap has no %s", filepath.Base(configPath))
	}
	return text
}

// configKey is one key of the ConfigMap's flatline.yaml, dotted
// ("http.expose"), as YAML has it: for keys whose files exist only in the
// pod, where configs.Load, which reads them, cannot follow.
func (r release) configKey(key string) any {
	r.t.Helper()
	var v any
	if err := yaml.Unmarshal([]byte(r.configText()), &v); err != nil {
		r.t.Fatalf("flatline.yaml: %v", err)
	}
	for _, k := range strings.Split(key, ".") {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	return v
}

// config loads the ConfigMap's flatline.yaml the way `flatline serve` and
// `flatline config validate` do (configs.Load validates), with env as the
// container's environment.
func (r release) config(env ...string) *configs.Config {
	r.t.Helper()
	return r.configIn(r.configText(), env...)
}

// configIn loads text as config does, the rendered flatline.yaml or a
// variant of it.
func (r release) configIn(text string, env ...string) *configs.Config {
	r.t.Helper()
	file := testenv.File(r.t, "flatline.yaml", text)
	cfg, err := configs.Load(configs.LoadOptions{File: file, Env: env})
	if err != nil {
		r.t.Fatalf("the rendered flatline.yaml does not validate: %v\n%s", err, text)
	}
	if len(cfg.Warnings) > 0 {
		r.t.Errorf("loading the rendered configuration warns: %q", cfg.Warnings)
	}
	return cfg
}

// port resolves a probe's or Service's port, a name or a number, against
// the container's ports.
func (c container) port(t *testing.T, p any) int {
	t.Helper()
	for _, cp := range c.Ports {
		if cp.Name == p || cp.ContainerPort == p {
			return cp.ContainerPort
		}
	}
	t.Fatalf("port %v is not a port of the container %v", p, c.Ports)
	return 0
}

func TestChartRunsServeWithTheRenderedConfig(t *testing.T) {
	t.Parallel()
	r := render(t)
	c := r.container()
	if got := append(slices.Clone(c.Command), c.Args...); len(got) < 4 || filepath.Base(got[0]) != "flatline" ||
		!slices.Equal(got[1:], []string{"serve", "--config", configPath}) {
		t.Errorf("container runs %q, want flatline serve --config %s", got, configPath)
	}
	var cm manifest
	r.must("ConfigMap", &cm)
	volume := ""
	for _, v := range r.pod().Volumes {
		if v.ConfigMap != nil && v.ConfigMap.Name == cm.Metadata.Name {
			volume = v.Name
		}
	}
	mounted := false
	for _, m := range c.VolumeMounts {
		mounted = mounted || (m.Name == volume && m.MountPath == filepath.Dir(configPath) && m.ReadOnly)
	}
	if volume == "" || !mounted {
		t.Errorf("ConfigMap %s is not mounted read-only at %s: volumes %+v, mounts %+v", cm.Metadata.Name, filepath.Dir(configPath), r.pod().Volumes, c.VolumeMounts)
	}
	r.config()
}

func TestChartProbesReachTheHTTPServer(t *testing.T) {
	t.Parallel()
	r := render(t)
	c := r.container()
	host, port, err := net.SplitHostPort(r.config().HTTP.Addr)
	if err != nil {
		t.Fatal(err)
	}
	if host != "0.0.0.0" || port != "9464" {
		t.Errorf("http.addr %s:%s, want 0.0.0.0:9464: the kubelet's probes and Prometheus come from outside the pod", host, port)
	}
	for _, p := range []struct {
		name  string
		probe probe
		path  string
	}{
		{"liveness", c.LivenessProbe, "/healthz"},
		{"readiness", c.ReadinessProbe, "/readyz"},
	} {
		if p.probe.HTTPGet == nil {
			t.Errorf("%s probe: no httpGet", p.name)
			continue
		}
		if p.probe.HTTPGet.Path != p.path {
			t.Errorf("%s probe path %q, want %q", p.name, p.probe.HTTPGet.Path, p.path)
		}
		if got := strconv.Itoa(c.port(t, p.probe.HTTPGet.Port)); got != port {
			t.Errorf("%s probe on port %s, http.addr listens on %s", p.name, got, port)
		}
	}
}

func TestChartRunsUnprivileged(t *testing.T) {
	t.Parallel()
	pod := render(t).pod()
	sc := pod.SecurityContext
	if sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser == 0 {
		t.Errorf("pod securityContext: runAsNonRoot %v, runAsUser %v; want true and a non-zero UID", deref(sc.RunAsNonRoot), deref(sc.RunAsUser))
	}
	if sc.SeccompProfile.Type != "RuntimeDefault" {
		t.Errorf("pod seccompProfile %q, want RuntimeDefault", sc.SeccompProfile.Type)
	}
	c := pod.Containers[0].SecurityContext
	if c.RunAsNonRoot == nil || !*c.RunAsNonRoot {
		t.Error("container securityContext.runAsNonRoot is not true")
	}
	if c.ReadOnlyRootFilesystem == nil || !*c.ReadOnlyRootFilesystem {
		t.Error("container securityContext.readOnlyRootFilesystem is not true")
	}
	if c.AllowPrivilegeEscalation == nil || *c.AllowPrivilegeEscalation {
		t.Error("container securityContext.allowPrivilegeEscalation is not false")
	}
	if !slices.Equal(c.Capabilities.Drop, []string{"ALL"}) {
		t.Errorf("container drops capabilities %q, want [ALL]", c.Capabilities.Drop)
	}
	// Service links would add FLATLINE_SERVICE_HOST and the like for a
	// release named flatline, which flatline reads as (unknown) settings.
	if pod.EnableServiceLinks == nil || *pod.EnableServiceLinks {
		t.Error("enableServiceLinks is not false")
	}
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

// A pod killed inside its graceful shutdown leaves the consumer group late
// and its scanner leases to expire: the grace period must outlast
// shutdown_timeout, however it is written.
func TestChartGracePeriodOutlastsShutdownTimeout(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"values as shipped", nil},
		{"flatline's default", []string{"--set", "config.shutdown_timeout=null"}},
		{"minutes and seconds", []string{"--set", "config.shutdown_timeout=1m30s"}},
		{"milliseconds", []string{"--set", "config.shutdown_timeout=1500ms"}},
		{"fraction", []string{"--set", "config.shutdown_timeout=2.5s"}},
		{"hours", []string{"--set", "config.shutdown_timeout=1h"}},
		{"one extra second", []string{"--set", "config.shutdown_timeout=1500ms", "--set", "terminationGraceExtraSeconds=1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := render(t, tc.args...)
			grace := r.pod().TerminationGracePeriodSeconds
			shutdown := r.config().ShutdownTimeout
			if grace == nil || time.Duration(*grace)*time.Second <= shutdown {
				t.Errorf("terminationGracePeriodSeconds %v, not above shutdown_timeout %s", deref(grace), shutdown)
			}
		})
	}
}

func TestChartRefusesWhatWouldNotWork(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		set, want string
	}{
		{"config.shutdown_timeout=90", "config.shutdown_timeout: want a Go duration"},
		{"config.shutdown_timeout=1m30", "config.shutdown_timeout: want a Go duration"},
		{"terminationGraceExtraSeconds=0", "terminationGraceExtraSeconds: must be at least 1"},
		{"config.http.addr=127.0.0.1:9464", "config.http.addr: the chart sets it to 0.0.0.0:9464"},
		{"config.redis.password=hunter2", "config.redis.password: a ConfigMap is not secret"},
		{"config.kafka.sasl.password=hunter2", "config.kafka.sasl.password: a ConfigMap is not secret"},
		{"config.redis.sentinel.password=hunter2", "config.redis.sentinel.password: a ConfigMap is not secret"},
		{"webConfig.secretName=web,config.http.web_config_file=/web.yml", "config.http.web_config_file: the chart sets it from webConfig.secretName"},
		{"secrets.redisPassword.name=auth,config.redis.password_file=/pw", "config.redis.password_file: secrets.redisPassword.name gives that password too"},
		{"secrets.kafkaSaslPassword.name=auth,config.kafka.sasl.password_file=/pw", "config.kafka.sasl.password_file: secrets.kafkaSaslPassword.name gives that password too"},
		{"resources.limits.memory=256MB", `resources.limits.memory: want a quantity of bytes such as 256Mi, got "256MB"`},
	} {
		t.Run(tc.set, func(t *testing.T) {
			t.Parallel()
			_, err := helmTemplate(t, "--set", tc.set)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("helm template --set %s: %v, want an error with %q", tc.set, err, tc.want)
			}
		})
	}
}

// passwordSecrets names a Secret for each of the three passwords (Redis,
// Sentinel, Kafka SASL, the last under a key of its own) and the settings
// that use them.
var passwordSecrets = []string{
	"--set", "secrets.redisPassword.name=redis-auth",
	"--set", "secrets.redisSentinelPassword.name=sentinel-auth",
	"--set", "config.redis.mode=sentinel",
	"--set", "config.redis.sentinel.master=flatline",
	"--set", "secrets.kafkaSaslPassword.name=kafka-auth",
	"--set", "secrets.kafkaSaslPassword.key=sasl",
	"--set", "config.kafka.sasl.mechanism=SCRAM-SHA-512",
	"--set", "config.kafka.sasl.username=flatline",
}

func TestChartPasswordsComeFromSecrets(t *testing.T) {
	t.Parallel()
	r := render(t, passwordSecrets...)
	want := map[string][2]string{
		"FLATLINE_REDIS_PASSWORD":          {"redis-auth", "password"},
		"FLATLINE_REDIS_SENTINEL_PASSWORD": {"sentinel-auth", "password"},
		"FLATLINE_KAFKA_SASL_PASSWORD":     {"kafka-auth", "sasl"},
	}
	// Every variable the chart sets must be a setting flatline knows: give
	// each a value and load the configuration with them (r.config fails on
	// a warning about an unknown FLATLINE_ variable).
	var env []string
	for _, e := range r.container().Env {
		value := e.Value
		if w, ok := want[e.Name]; ok {
			if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil ||
				e.ValueFrom.SecretKeyRef.Name != w[0] || e.ValueFrom.SecretKeyRef.Key != w[1] {
				t.Errorf("%s: want it from Secret %s key %s, got %+v", e.Name, w[0], w[1], e.ValueFrom)
			}
			delete(want, e.Name)
			value = "secret-of-" + e.Name
		}
		env = append(env, e.Name+"="+value)
	}
	for name := range want {
		t.Errorf("%s is not set", name)
	}
	cfg := r.config(env...)
	if cfg.Redis.Password != "secret-of-FLATLINE_REDIS_PASSWORD" || cfg.Kafka.SASL.Password != "secret-of-FLATLINE_KAFKA_SASL_PASSWORD" ||
		cfg.Redis.Sentinel.Password != "secret-of-FLATLINE_REDIS_SENTINEL_PASSWORD" {
		t.Errorf("the Secrets' variables do not reach redis.password, redis.sentinel.password and kafka.sasl.password: %q, %q, %q",
			cfg.Redis.Password, cfg.Redis.Sentinel.Password, cfg.Kafka.SASL.Password)
	}
	// No password at all without a Secret: the variables are not set empty.
	for _, e := range render(t).container().Env {
		if strings.HasSuffix(e.Name, "_PASSWORD") {
			t.Errorf("%s is set without a Secret named", e.Name)
		}
	}
}

func TestChartKeepsInstancesUpThroughDisruptions(t *testing.T) {
	t.Parallel()
	r := render(t)
	pod := r.pod()
	var d deployment
	r.must("Deployment", &d)
	labels := d.Spec.Template.Metadata.Labels
	selects := func(sel map[string]string) bool { return selects(sel, labels) }
	var pdb selectorSpec
	r.must("PodDisruptionBudget", &pdb)
	if !selects(pdb.Spec.Selector.MatchLabels) {
		t.Errorf("PodDisruptionBudget selects %v, not the pods %v", pdb.Spec.Selector.MatchLabels, labels)
	}
	// A pod that is not ready does no work; under the default policy such
	// pods (all of them, while Redis is out) would block every drain.
	var policy struct {
		Spec struct {
			UnhealthyPodEvictionPolicy string `yaml:"unhealthyPodEvictionPolicy"`
		} `yaml:"spec"`
	}
	r.must("PodDisruptionBudget", &policy)
	if got := policy.Spec.UnhealthyPodEvictionPolicy; got != "AlwaysAllow" {
		t.Errorf("PodDisruptionBudget unhealthyPodEvictionPolicy %q, want AlwaysAllow: a drain must be able to evict unready pods", got)
	}
	var svc struct {
		Spec struct {
			Selector map[string]string `yaml:"selector"`
			Ports    []struct {
				Name       string `yaml:"name"`
				TargetPort any    `yaml:"targetPort"`
			} `yaml:"ports"`
		} `yaml:"spec"`
	}
	r.must("Service", &svc)
	if !selects(svc.Spec.Selector) {
		t.Errorf("Service selects %v, not the pods %v", svc.Spec.Selector, labels)
	}
	if len(svc.Spec.Ports) != 1 || pod.Containers[0].port(t, svc.Spec.Ports[0].TargetPort) != 9464 {
		t.Errorf("Service ports %+v, want one to the http port 9464", svc.Spec.Ports)
	}
}

// selects reports whether the label selector sel, not empty, selects a pod
// with labels.
func selects(sel, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return len(sel) > 0
}

func (r release) podLabels() map[string]string {
	r.t.Helper()
	var d deployment
	r.must("Deployment", &d)
	return d.Spec.Template.Metadata.Labels
}

// valuesFile writes a values file for helm's -f, for what --set cannot say
// (lists of objects, numbers as YAML has them).
func valuesFile(t *testing.T, text string) string {
	t.Helper()
	return testenv.File(t, "values.yaml", text)
}

func TestChartMonitoringIsOptional(t *testing.T) {
	t.Parallel()
	r := render(t)
	for _, kind := range []string{"ServiceMonitor", "PrometheusRule"} {
		if r.decode(kind, &struct{}{}) {
			t.Errorf("%s rendered by default; the CRD may not exist in the cluster", kind)
		}
	}

	r = render(t, "--set", "serviceMonitor.enabled=true", "--set", "prometheusRule.enabled=true")
	var sm struct {
		Spec struct {
			Selector struct {
				MatchLabels map[string]string `yaml:"matchLabels"`
			} `yaml:"selector"`
			Endpoints []struct {
				Port string `yaml:"port"`
				Path string `yaml:"path"`
			} `yaml:"endpoints"`
		} `yaml:"spec"`
	}
	r.must("ServiceMonitor", &sm)
	if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != "http" || sm.Spec.Endpoints[0].Path != "/metrics" {
		t.Errorf("ServiceMonitor endpoints %+v, want port http, path /metrics", sm.Spec.Endpoints)
	}

	var rule struct {
		Spec struct {
			Groups any `yaml:"groups"`
		} `yaml:"spec"`
	}
	r.must("PrometheusRule", &rule)
	var alerts struct {
		Groups any `yaml:"groups"`
	}
	if err := yaml.Unmarshal(deploy.AlertsYAML(), &alerts); err != nil {
		t.Fatal(err)
	}
	if alerts.Groups == nil || !reflect.DeepEqual(rule.Spec.Groups, alerts.Groups) {
		t.Errorf("the PrometheusRule's groups differ from %s's:\n%v\nwant\n%v", deploy.AlertsFile, rule.Spec.Groups, alerts.Groups)
	}
}

// The chart's PrometheusRule reads files/alerts.yml (.Files cannot reach
// outside the chart); it must be deploy/prometheus/alerts.yml, the file
// promtool checks and tests.
func TestChartAlertsAreDeployPrometheusAlerts(t *testing.T) {
	t.Parallel()
	want := deploy.AlertsYAML()
	copyFile := filepath.Join(chartDir, "files", "alerts.yml")
	got, err := os.ReadFile(copyFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("deploy/%s differs from deploy/%s: cp deploy/%s deploy/%s", copyFile, deploy.AlertsFile, deploy.AlertsFile, copyFile)
	}
}

// The container asks for the CPU and memory measured in deploy/README.md
// ("Sizing"), with a memory limit above the request and no CPU limit
// (throttling delays timeouts).
func TestChartRequestsMeasuredResourcesWithoutACPULimit(t *testing.T) {
	t.Parallel()
	var d struct {
		Spec struct {
			Template struct {
				Spec struct {
					Containers []struct {
						Resources struct {
							Requests map[string]string `yaml:"requests"`
							Limits   map[string]string `yaml:"limits"`
						} `yaml:"resources"`
					} `yaml:"containers"`
				} `yaml:"spec"`
			} `yaml:"template"`
		} `yaml:"spec"`
	}
	render(t).must("Deployment", &d)
	if len(d.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(d.Spec.Template.Spec.Containers))
	}
	r := d.Spec.Template.Spec.Containers[0].Resources
	if r.Requests["cpu"] == "" || r.Requests["memory"] == "" {
		t.Errorf("requests %v, want cpu and memory", r.Requests)
	}
	if _, ok := r.Limits["cpu"]; ok {
		t.Errorf("limits %v: a CPU limit throttles the scanners", r.Limits)
	}
	if r.Limits["memory"] == "" {
		t.Errorf("limits %v, want a memory limit", r.Limits)
	}
	values, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(values), "PLACEHOLDER") {
		t.Error("values.yaml still has placeholder resources")
	}
}

// Instances land on different nodes when they can, so a node lost takes one
// instance's partitions and shards, not all of them.
func TestChartSpreadsInstancesOverNodes(t *testing.T) {
	t.Parallel()
	r := render(t)
	labels := r.podLabels()
	a := r.pod().Affinity
	if a == nil || a.PodAntiAffinity == nil || len(a.PodAntiAffinity.Preferred) != 1 || len(a.PodAntiAffinity.Required) != 0 {
		t.Fatalf("affinity %+v, want one preferred pod anti-affinity term and no required one", a)
	}
	term := a.PodAntiAffinity.Preferred[0]
	if term.Weight <= 0 || term.PodAffinityTerm.TopologyKey != "kubernetes.io/hostname" || !selects(term.PodAffinityTerm.LabelSelector.MatchLabels, labels) {
		t.Errorf("anti-affinity term %+v, want a positive weight on kubernetes.io/hostname selecting the pods %v", term, labels)
	}

	a = render(t, "--set", "podAntiAffinity=hard").pod().Affinity
	if a == nil || a.PodAntiAffinity == nil || len(a.PodAntiAffinity.Required) != 1 || len(a.PodAntiAffinity.Preferred) != 0 ||
		a.PodAntiAffinity.Required[0].TopologyKey != "kubernetes.io/hostname" {
		t.Errorf("podAntiAffinity hard: affinity %+v, want one required term on kubernetes.io/hostname", a)
	}
	if a := render(t, "--set", "podAntiAffinity=none").pod().Affinity; a != nil {
		t.Errorf("podAntiAffinity none: affinity %+v, want none", a)
	}

	// values.affinity replaces the default whole.
	const own = `{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"pool","operator":"In","values":["flatline"]}]}]}}}`
	var d struct {
		Spec struct {
			Template struct {
				Spec struct {
					Affinity any `yaml:"affinity"`
				} `yaml:"spec"`
			} `yaml:"template"`
		} `yaml:"spec"`
	}
	render(t, "-f", valuesFile(t, "affinity: "+own+"\n")).must("Deployment", &d)
	var want any
	if err := yaml.Unmarshal([]byte(own), &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(d.Spec.Template.Spec.Affinity, want) {
		t.Errorf("affinity %v, want values.affinity %v and nothing else", d.Spec.Template.Spec.Affinity, want)
	}
}

// webConfig.secretName mounts the Secret holding the exporter-toolkit web
// config and its certificate, points http.web_config_file at it, and keeps
// the probes and the ServiceMonitor able to reach a server that now speaks
// HTTPS and asks for a password.
func TestChartServesTheWebConfigFromASecret(t *testing.T) {
	t.Parallel()
	r := render(t,
		"--set", "webConfig.secretName=flatline-web",
		"--set", "webConfig.tls=true",
		"--set", "webConfig.probeHeaders[0].name=Authorization",
		"--set", "webConfig.probeHeaders[0].value=Basic cHJvYmU6cHJvYmU=",
		"--set", "config.http.expose=metrics",
		"--set", "serviceMonitor.enabled=true",
	)
	c := r.container()
	volume := ""
	for _, v := range r.pod().Volumes {
		if v.Secret != nil && v.Secret.SecretName == "flatline-web" {
			volume = v.Name
		}
	}
	dir := ""
	for _, m := range c.VolumeMounts {
		if m.Name == volume {
			dir = m.MountPath
			// A subPath mount is never updated: a renewed certificate
			// would not reach flatline, which re-reads the files.
			if !m.ReadOnly || m.SubPath != "" {
				t.Errorf("web config mounted %+v, want read-only and whole", m)
			}
		}
	}
	if volume == "" || dir == "" {
		t.Fatalf("Secret flatline-web is not mounted: volumes %+v, mounts %+v", r.pod().Volumes, c.VolumeMounts)
	}
	if got, want := r.configKey("http.web_config_file"), filepath.Join(dir, "web-config.yml"); got != want {
		t.Errorf("http.web_config_file %v, want %s (the Secret's key web-config.yml)", got, want)
	}
	// The other http keys survive the chart setting addr and web_config_file.
	if got := r.configKey("http.expose"); got != "metrics" {
		t.Errorf("http.expose %v, want metrics", got)
	}
	if got := r.configKey("http.addr"); got != "0.0.0.0:9464" {
		t.Errorf("http.addr %v, want 0.0.0.0:9464", got)
	}
	for name, p := range map[string]probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
		if p.HTTPGet == nil || p.HTTPGet.Scheme != "HTTPS" {
			t.Errorf("%s probe %+v, want scheme HTTPS", name, p.HTTPGet)
			continue
		}
		if len(p.HTTPGet.HTTPHeaders) != 1 || p.HTTPGet.HTTPHeaders[0].Name != "Authorization" {
			t.Errorf("%s probe headers %+v, want the Authorization header of webConfig.probeHeaders", name, p.HTTPGet.HTTPHeaders)
		}
	}
	var sm struct {
		Spec struct {
			Endpoints []struct {
				Scheme string `yaml:"scheme"`
			} `yaml:"endpoints"`
		} `yaml:"spec"`
	}
	r.must("ServiceMonitor", &sm)
	if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Scheme != "https" {
		t.Errorf("ServiceMonitor endpoints %+v, want scheme https", sm.Spec.Endpoints)
	}

	// Without one: plain HTTP, as before.
	r = render(t)
	if v := r.configKey("http.web_config_file"); v != nil {
		t.Errorf("http.web_config_file %v without webConfig.secretName", v)
	}
	if p := r.container().LivenessProbe.HTTPGet; p == nil || (p.Scheme != "" && p.Scheme != "HTTP") {
		t.Errorf("liveness probe %+v, want HTTP", p)
	}
	for _, v := range r.pod().Volumes {
		if v.Secret != nil {
			t.Errorf("volume %s of Secret %s without webConfig.secretName", v.Name, v.Secret.SecretName)
		}
	}
}

// The passwords can be files instead of variables: the rendered
// *.password_file keys must name the files the projected volume holds, and
// flatline must load them.
func TestChartMountsPasswordsAsFiles(t *testing.T) {
	t.Parallel()
	r := render(t, append([]string{"--set", "secrets.asFiles=true"}, passwordSecrets...)...)
	c := r.container()
	for _, e := range c.Env {
		if strings.HasSuffix(e.Name, "_PASSWORD") {
			t.Errorf("%s is set: with secrets.asFiles the password must stay out of the environment", e.Name)
		}
	}
	// Which Secret key each file holds, by the file's path in the container.
	files := map[string]string{}
	for _, v := range r.pod().Volumes {
		if v.Projected == nil {
			continue
		}
		for _, m := range c.VolumeMounts {
			if m.Name != v.Name {
				continue
			}
			if !m.ReadOnly || m.SubPath != "" {
				t.Errorf("volume %s mounted %+v, want read-only and whole", v.Name, m)
			}
			for _, src := range v.Projected.Sources {
				if src.Secret == nil {
					continue
				}
				for _, it := range src.Secret.Items {
					files[filepath.Join(m.MountPath, it.Path)] = src.Secret.Name + "/" + it.Key
				}
			}
		}
	}
	want := map[string]string{
		"redis.password_file":          "redis-auth/password",
		"redis.sentinel.password_file": "sentinel-auth/password",
		"kafka.sasl.password_file":     "kafka-auth/sasl",
	}
	text := r.configText()
	dir := t.TempDir()
	for key, secret := range want {
		path, _ := r.configKey(key).(string)
		if got, ok := files[path]; !ok || got != secret {
			t.Errorf("%s is %q, which holds %q; want Secret key %s mounted there (mounted: %v)", key, path, got, secret, files)
			continue
		}
		// The same file outside the pod, for configs.Load to read.
		local := filepath.Join(dir, strings.ReplaceAll(secret, "/", "-"))
		if err := os.WriteFile(local, []byte("secret-of-"+secret+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		text = strings.ReplaceAll(text, path, local)
	}
	cfg := r.configIn(text)
	if cfg.Redis.PasswordFile == "" || cfg.Redis.Sentinel.PasswordFile == "" || cfg.Kafka.SASL.PasswordFile == "" {
		t.Errorf("password files not loaded: %q, %q, %q", cfg.Redis.PasswordFile, cfg.Redis.Sentinel.PasswordFile, cfg.Kafka.SASL.PasswordFile)
	}
	// Without a Secret named, no file and no key.
	r = render(t, "--set", "secrets.asFiles=true")
	for key := range want {
		if v := r.configKey(key); v != nil {
			t.Errorf("%s is %v without a Secret named", key, v)
		}
	}
	for _, v := range r.pod().Volumes {
		if v.Projected != nil {
			t.Errorf("volume %s of password files without a Secret named", v.Name)
		}
	}
}

// GOMEMLIMIT is gomemlimitPercent of the memory limit, in bytes, whatever
// the limit's unit; none without a limit.
func TestChartSetsGOMEMLIMITBelowTheMemoryLimit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		want string // "" for no GOMEMLIMIT
	}{
		{"values as shipped: 90% of 256Mi", nil, "241591910"},
		{"1Gi", []string{"--set", "resources.limits.memory=1Gi"}, "966367641"},
		{"decimal unit, 50%", []string{"--set", "resources.limits.memory=1G", "--set", "gomemlimitPercent=50"}, "500000000"},
		{"bytes in a values file", []string{"-f", valuesFile(t, "resources:\n  limits:\n    memory: 268435456\n")}, "241591910"},
		{"no memory limit", []string{"--set", "resources.limits=null"}, ""},
		{"percent 0", []string{"--set", "gomemlimitPercent=0"}, ""},
		{"extraEnv's own", []string{"--set", "extraEnv[0].name=GOMEMLIMIT", "--set", "extraEnv[0].value=100MiB"}, "100MiB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got []string
			for _, e := range render(t, tc.args...).container().Env {
				if e.Name == "GOMEMLIMIT" {
					got = append(got, e.Value)
				}
			}
			switch {
			case tc.want == "" && len(got) > 0:
				t.Errorf("GOMEMLIMIT %q, want none", got)
			case tc.want != "" && !slices.Equal(got, []string{tc.want}):
				t.Errorf("GOMEMLIMIT %q, want one, %s", got, tc.want)
			}
		})
	}
}

type networkPolicy struct {
	Spec struct {
		PodSelector struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"podSelector"`
		PolicyTypes []string `yaml:"policyTypes"`
		Ingress     []struct {
			From  []any        `yaml:"from"`
			Ports []policyPort `yaml:"ports"`
		} `yaml:"ingress"`
		Egress []struct {
			To    []any        `yaml:"to"`
			Ports []policyPort `yaml:"ports"`
		} `yaml:"egress"`
	} `yaml:"spec"`
}

type policyPort struct {
	Port     any    `yaml:"port"`
	Protocol string `yaml:"protocol"`
}

// The NetworkPolicy lets the peers the values name reach the http port and
// nothing else (the kubelet's probes come from the node, which policies do
// not filter); egress is restricted only when rules are given, and then
// keeps DNS.
func TestChartNetworkPolicyAdmitsOnlyNamedPeers(t *testing.T) {
	t.Parallel()
	// Off by default: on, it would have to guess where Prometheus runs, and
	// a wrong guess silences the metrics flatline's alerts depend on.
	if render(t).decode("NetworkPolicy", &networkPolicy{}) {
		t.Error("NetworkPolicy rendered by default")
	}

	r := render(t, "--set", "networkPolicy.enabled=true")
	var np networkPolicy
	r.must("NetworkPolicy", &np)
	c := r.container()
	if !selects(np.Spec.PodSelector.MatchLabels, r.podLabels()) {
		t.Errorf("NetworkPolicy selects %v, not the pods %v", np.Spec.PodSelector.MatchLabels, r.podLabels())
	}
	if !slices.Equal(np.Spec.PolicyTypes, []string{"Ingress"}) {
		t.Errorf("policyTypes %q, want [Ingress]: egress stays open unless networkPolicy.egress has rules", np.Spec.PolicyTypes)
	}
	monitoring := map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": "monitoring"}}}
	if len(np.Spec.Ingress) != 1 || !reflect.DeepEqual(np.Spec.Ingress[0].From, []any{monitoring}) {
		t.Fatalf("ingress %+v, want one rule from networkPolicy.ingressFrom (the monitoring namespace)", np.Spec.Ingress)
	}
	if ports := np.Spec.Ingress[0].Ports; len(ports) != 1 || c.port(t, ports[0].Port) != 9464 || ports[0].Protocol != "TCP" {
		t.Errorf("ingress ports %+v, want the http port 9464, TCP", ports)
	}

	// Egress rules restrict egress to them and DNS; no peer, no ingress.
	r = render(t, "-f", valuesFile(t, `
networkPolicy:
  enabled: true
  ingressFrom: []
  egress:
    - to: [{podSelector: {matchLabels: {app: redis}}}]
      ports: [{port: 6379, protocol: TCP}]
`))
	np = networkPolicy{}
	r.must("NetworkPolicy", &np)
	if !slices.Equal(np.Spec.PolicyTypes, []string{"Ingress", "Egress"}) {
		t.Errorf("policyTypes %q, want [Ingress Egress]", np.Spec.PolicyTypes)
	}
	if len(np.Spec.Ingress) != 0 {
		t.Errorf("ingress %+v with no peer named, want none", np.Spec.Ingress)
	}
	dns, redis := false, false
	for _, e := range np.Spec.Egress {
		for _, p := range e.Ports {
			dns = dns || (len(e.To) == 0 && p.Port == 53 && p.Protocol == "UDP")
			redis = redis || (len(e.To) == 1 && p.Port == 6379)
		}
	}
	if !dns || !redis {
		t.Errorf("egress %+v, want DNS (UDP 53 anywhere) and the rule to Redis", np.Spec.Egress)
	}
}

// values.schema.json makes helm refuse a value of the wrong type, outside
// an enum, or under an unknown key, naming where it is, before anything
// renders.
func TestChartSchemaRefusesBadValues(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		set, want string
	}{
		{"httpPort=metrics", "'/httpPort': got string, want integer"},
		{"replicaCount=two", "'/replicaCount': got string, want integer"},
		{"config.http.expose=everything", "'/config/http/expose': value must be one of 'all', 'metrics'"},
		{"networkPolicy.enabled=yes", "'/networkPolicy/enabled': got string, want boolean"},
		{"podAntiAffinity=sometimes", "'/podAntiAffinity': value must be one of"},
		{"podDisruptionBudget.unhealthyPodEvictionPolicy=Never", "'/podDisruptionBudget/unhealthyPodEvictionPolicy': value must be one of"},
		{"gomemlimitPercent=120", "'/gomemlimitPercent': maximum"},
		{"secrets.asFiles=1", "'/secrets/asFiles': got number, want boolean"},
		{"replicas=3", "additional properties 'replicas' not allowed"},
		{"livenessProbe.httpGet.path=/", "'/livenessProbe/httpGet'"},
	} {
		t.Run(tc.set, func(t *testing.T) {
			t.Parallel()
			_, err := helmTemplate(t, "--set", tc.set)
			if err == nil || !strings.Contains(err.Error(), "schema") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("helm template --set %s: %v, want the schema's error with %q", tc.set, err, tc.want)
			}
		})
	}
}
