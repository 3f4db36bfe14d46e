package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/knadh/koanf/parsers/yaml"

	"github.com/kdelay/kdelay/config"
	"github.com/kdelay/kdelay/forwarder"
)

const kubernetesDir = "../../deploy/kubernetes"

// kube is deploy/kubernetes read: each file holds one object.
type kube struct {
	files     []string       // the file names, kustomization.yaml included
	byKind    map[string]obj // the objects, by kind
	container obj            // the StatefulSet's one container
}

// obj is a YAML mapping, walked with at.
type obj = map[string]any

func readKube(t *testing.T) kube {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(kubernetesDir, "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no manifests in %s (%v)", kubernetesDir, err)
	}
	k := kube{byKind: map[string]obj{}}
	for _, p := range paths {
		text, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		o, err := yaml.Parser().Unmarshal(text)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		k.files = append(k.files, filepath.Base(p))
		k.byKind[at[string](t, o, "kind")] = o
	}
	containers := at[[]any](t, k.byKind["StatefulSet"], "spec", "template", "spec", "containers")
	if len(containers) != 1 {
		t.Fatalf("the StatefulSet has %d containers, want 1", len(containers))
	}
	k.container = containers[0].(obj)
	return k
}

// at is the value at path in o, of type T; the test fails when there is
// none, or of another type.
func at[T any](t *testing.T, o obj, path ...string) T {
	t.Helper()
	var v any = o
	for i, name := range path {
		m, ok := v.(obj)
		if !ok {
			t.Fatalf("%s is not a mapping", strings.Join(path[:i], "."))
		}
		v = m[name]
	}
	got, ok := v.(T)
	if !ok {
		t.Fatalf("%s is %#v, want a %T", strings.Join(path, "."), v, got)
	}
	return got
}

func TestDeployKubernetes(t *testing.T) {
	t.Parallel()
	k := readKube(t)

	t.Run("kustomization lists every manifest", func(t *testing.T) {
		t.Parallel()
		var listed []string
		for _, r := range at[[]any](t, k.byKind["Kustomization"], "resources") {
			listed = append(listed, r.(string))
		}
		want := slices.DeleteFunc(slices.Clone(k.files), func(f string) bool { return f == "kustomization.yaml" })
		slices.Sort(listed)
		if !slices.Equal(listed, want) {
			t.Errorf("kustomization.yaml lists %v, want the manifests %v", listed, want)
		}
	})

	t.Run("args, variables and config file load as kdelay serve's settings", func(t *testing.T) {
		t.Parallel()
		cfg, environ := k.load(t)
		if cfg.Embedded() {
			t.Error("the config file sets no brokers: the pods would run embedded brokers of their own")
		}
		checkEnviron(t, cfg, environ)
		values := settings(cfg)
		if want := at[string](t, k.byKind["StatefulSet"], "metadata", "name") + "-0"; values["instance-id"] != want {
			t.Errorf("instance-id of the first pod = %q, want its pod name %q", values["instance-id"], want)
		}
		host, port, err := net.SplitHostPort(cfg.Admin)
		if err != nil || (host != "" && host != "0.0.0.0") || port != strconv.Itoa(k.adminPort(t)) {
			t.Errorf("admin = %q, want :%d, on every interface so that the kubelet and Prometheus reach it", cfg.Admin, k.adminPort(t))
		}
	})

	t.Run("probes and scrape ask the admin listener's paths", func(t *testing.T) {
		t.Parallel()
		live := at[string](t, k.container, "livenessProbe", "httpGet", "path")
		ready := at[string](t, k.container, "readinessProbe", "httpGet", "path")
		annotations := at[obj](t, k.byKind["StatefulSet"], "spec", "template", "metadata", "annotations")
		scrape := annotations["prometheus.io/path"]
		if live != "/livez" || ready != "/readyz" || scrape != "/metrics" {
			t.Errorf("liveness %s, readiness %s, scrape %v; want /livez (never asks Kafka), /readyz, /metrics", live, ready, scrape)
		}
		for _, probe := range []string{"livenessProbe", "readinessProbe"} {
			if got := at[string](t, k.container, probe, "httpGet", "port"); got != "admin" {
				t.Errorf("%s port = %s, want the container port named admin", probe, got)
			}
		}
		if got := annotations["prometheus.io/port"]; got != strconv.Itoa(k.adminPort(t)) {
			t.Errorf("prometheus.io/port = %v, want the admin port %d", got, k.adminPort(t))
		}
		admin := serveAdmin(t)
		for _, path := range []string{live, ready, scrape.(string)} {
			if !eventually(30*time.Second, func() bool { return httpStatus(admin, path) == http.StatusOK }) {
				t.Errorf("GET %s from kdelay serve's admin listener = %d, want 200", path, httpStatus(admin, path))
			}
		}
	})

	t.Run("memory is the measured peak, and no CPU limit", func(t *testing.T) {
		t.Parallel()
		res := at[obj](t, k.container, "resources")
		want := fmt.Sprintf("%dMi", peakRSSGoal(t))
		if req, limit := at[string](t, res, "requests", "memory"), at[string](t, res, "limits", "memory"); req != want || limit != want {
			t.Errorf("memory request %s, limit %s; want both %s, the peak RSS goal of docs/BENCHMARKS.md", req, limit, want)
		}
		if cpu, ok := at[obj](t, res, "limits")["cpu"]; ok {
			t.Errorf("CPU limit %v: its throttling makes deliveries late; want none", cpu)
		}
	})

	t.Run("runs as the image's user", func(t *testing.T) {
		t.Parallel()
		uid, gid := imageUser(t)
		sc := at[obj](t, k.byKind["StatefulSet"], "spec", "template", "spec", "securityContext")
		got := fmt.Sprintf("%v:%v:%v:%v", sc["runAsUser"], sc["runAsGroup"], sc["fsGroup"], sc["runAsNonRoot"])
		if want := fmt.Sprintf("%d:%d:%d:true", uid, gid, gid); got != want {
			t.Errorf("runAsUser:runAsGroup:fsGroup:runAsNonRoot = %s, want %s, the Dockerfile's USER", got, want)
		}
	})

	t.Run("service and disruption budget select the pods", func(t *testing.T) {
		t.Parallel()
		sts := k.byKind["StatefulSet"]
		labels := at[obj](t, sts, "spec", "template", "metadata", "labels")
		selectors := map[string]obj{
			"StatefulSet":         at[obj](t, sts, "spec", "selector", "matchLabels"),
			"Service":             at[obj](t, k.byKind["Service"], "spec", "selector"),
			"PodDisruptionBudget": at[obj](t, k.byKind["PodDisruptionBudget"], "spec", "selector", "matchLabels"),
		}
		for kind, sel := range selectors {
			for name, v := range sel {
				if labels[name] != v {
					t.Errorf("%s selects %s=%v, which the pods' labels %v do not have", kind, name, v, labels)
				}
			}
		}
		if got, want := at[string](t, sts, "spec", "serviceName"), at[string](t, k.byKind["Service"], "metadata", "name"); got != want {
			t.Errorf("serviceName %s, want the Service %s", got, want)
		}
	})

	t.Run("stopping waits longer than kdelay's shutdown", func(t *testing.T) {
		t.Parallel()
		grace := at[int](t, k.byKind["StatefulSet"], "spec", "template", "spec", "terminationGracePeriodSeconds")
		if time.Duration(grace)*time.Second <= forwarder.DefaultShutdownTimeout {
			t.Errorf("terminationGracePeriodSeconds %d, want more than shutdown-timeout %s", grace, forwarder.DefaultShutdownTimeout)
		}
	})
}

// load loads the container's settings as kdelay serve in its first pod
// would: its args, its variables (the downward API's pod name given), and
// the files it names, which must be those its volumes mount. Each mount
// lies under a directory of the test's, which stands for the pod's root.
func (k kube) load(t *testing.T) (config.Config, []string) {
	t.Helper()
	root := t.TempDir()
	var mounts []string
	for _, m := range at[[]any](t, k.container, "volumeMounts") {
		mount := m.(obj)
		path := at[string](t, mount, "mountPath")
		mounts = append(mounts, path)
		k.mount(t, at[string](t, mount, "name"), root+path)
	}
	inRoot := func(s string) string {
		for _, m := range mounts {
			s = strings.ReplaceAll(s, m+"/", root+m+"/")
		}
		return s
	}
	k.rewriteFiles(t, root, mounts, inRoot)
	var args []string
	for _, a := range at[[]any](t, k.container, "args") {
		args = append(args, inRoot(a.(string)))
	}
	environ := k.environ(t)
	return loadServe(t, args, environ), environ
}

// mount writes what the volume name holds into dir: a ConfigMap's data, or
// a test file for each item of a secret (a CA certificate for .pem, else a
// password).
func (k kube) mount(t *testing.T, name, dir string) {
	t.Helper()
	var volume obj
	for _, v := range at[[]any](t, k.byKind["StatefulSet"], "spec", "template", "spec", "volumes") {
		if v.(obj)["name"] == name {
			volume = v.(obj)
		}
	}
	if volume == nil {
		t.Fatalf("volumeMount %s names no volume", name)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	switch {
	case volume["configMap"] != nil:
		cm := k.byKind["ConfigMap"]
		if want := at[string](t, volume, "configMap", "name"); at[string](t, cm, "metadata", "name") != want {
			t.Fatalf("volume %s mounts ConfigMap %s, which deploy/kubernetes does not hold", name, want)
		}
		for file, text := range at[obj](t, cm, "data") {
			writeText(t, filepath.Join(dir, file), text.(string))
		}
	case volume["secret"] != nil:
		for _, item := range at[[]any](t, volume, "secret", "items") {
			writeSecret(t, filepath.Join(dir, at[string](t, item.(obj), "path")))
		}
	default:
		t.Fatalf("volume %s is neither a ConfigMap nor a secret: the test does not know what it holds", name)
	}
}

// rewriteFiles puts the paths written in the mounted files under root too.
func (k kube) rewriteFiles(t *testing.T, root string, mounts []string, inRoot func(string) string) {
	t.Helper()
	for _, m := range mounts {
		files, _ := filepath.Glob(filepath.Join(root+m, "*.yaml"))
		for _, f := range files {
			text, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			writeText(t, f, inRoot(string(text)))
		}
	}
}

// environ is the container's variables in its first pod, all KDELAY_ ones.
func (k kube) environ(t *testing.T) []string {
	t.Helper()
	pod := at[string](t, k.byKind["StatefulSet"], "metadata", "name") + "-0"
	var environ []string
	for _, e := range at[[]any](t, k.container, "env") {
		name := at[string](t, e.(obj), "name")
		if !strings.HasPrefix(name, config.EnvPrefix) {
			t.Errorf("variable %s: kdelay reads only %s* variables", name, config.EnvPrefix)
		}
		v, _ := e.(obj)["value"].(string)
		if e.(obj)["valueFrom"] != nil {
			if field := at[string](t, e.(obj), "valueFrom", "fieldRef", "fieldPath"); field != "metadata.name" {
				t.Fatalf("variable %s from %s: the test knows metadata.name only", name, field)
			}
			v = pod
		}
		environ = append(environ, name+"="+v)
	}
	return environ
}

// adminPort is the container port named admin.
func (k kube) adminPort(t *testing.T) int {
	t.Helper()
	for _, p := range at[[]any](t, k.container, "ports") {
		if p.(obj)["name"] == "admin" {
			return at[int](t, p.(obj), "containerPort")
		}
	}
	t.Fatal("the container has no port named admin")
	return 0
}

// serveAdmin starts kdelay serve on its embedded broker and returns the
// address of its admin listener.
func serveAdmin(t *testing.T) string {
	t.Helper()
	s := startServe(t, binary(t), "serve", "--listen", "127.0.0.1:0", "--data-dir", t.TempDir())
	m := regexp.MustCompile(`msg=admin_listening addr=(\S+)`).FindStringSubmatch(s.out.String())
	if m == nil {
		t.Fatalf("kdelay serve logged no admin_listening line:\n%s", s.out)
	}
	return m[1]
}

func httpStatus(addr, path string) int {
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// peakRSSGoal is the goal of docs/BENCHMARKS.md for kdelay serve's peak
// RSS with its defaults, in MiB.
func peakRSSGoal(t *testing.T) int {
	t.Helper()
	text, err := os.ReadFile("../../docs/BENCHMARKS.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`\| peak RSS of .kdelay serve.[^|]*\| ≤ (\d+) MiB`).FindSubmatch(text)
	if m == nil {
		t.Fatal("docs/BENCHMARKS.md has no goal row for the peak RSS of kdelay serve (| peak RSS of `kdelay serve` ... | ≤ N MiB)")
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// imageUser is the uid and gid of the Dockerfile's USER.
func imageUser(t *testing.T) (uid, gid int) {
	t.Helper()
	text, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^USER (\d+):(\d+)$`).FindSubmatch(text)
	if m == nil {
		t.Fatal("the Dockerfile has no numeric USER uid:gid")
	}
	uid, _ = strconv.Atoi(string(m[1]))
	gid, _ = strconv.Atoi(string(m[2]))
	return uid, gid
}
