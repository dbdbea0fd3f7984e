// Package helm holds the test of the Helm chart (deploy/helm/connectd):
// it is rendered with Helm's own Go library against several values files,
// and every manifest is decoded strictly into the Kubernetes API's types.
package helm

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/common/util"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	sigsyaml "sigs.k8s.io/yaml"
)

// serviceMonitor is the part of monitoring.coreos.com/v1 ServiceMonitor the
// chart writes (the Prometheus Operator's type is not in k8s.io/api).
type serviceMonitor struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name   string            `json:"name"`
		Labels map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		Selector struct {
			MatchLabels map[string]string `json:"matchLabels"`
		} `json:"selector"`
		Endpoints []struct {
			Port     string `json:"port"`
			Path     string `json:"path"`
			Interval string `json:"interval"`
		} `json:"endpoints"`
	} `json:"spec"`
}

// rendered is one values file's manifests, decoded.
type rendered struct {
	deployment *appsv1.Deployment
	job        *batchv1.Job
	service    *corev1.Service
	sa         *corev1.ServiceAccount
	pdb        *policyv1.PodDisruptionBudget
	hpa        *autoscalingv2.HorizontalPodAutoscaler
	netpol     *networkingv1.NetworkPolicy
	monitor    *serviceMonitor
	raw        string
}

func load(t *testing.T) *chart.Chart {
	t.Helper()
	c, err := loader.Load("connectd")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// render renders the chart with values as `helm install connectd` does,
// the values checked against values.schema.json.
func render(c *chart.Chart, values map[string]any) (map[string]string, error) {
	vals, err := util.ToRenderValuesWithSchemaValidation(c, values,
		common.ReleaseOptions{Name: "connectd", Namespace: "connectd", IsInstall: true, Revision: 1},
		common.DefaultCapabilities.Copy(), false)
	if err != nil {
		return nil, err
	}
	return engine.Render(c, vals)
}

func valuesFile(t *testing.T, name string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := sigsyaml.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// decode splits the manifests and decodes each strictly (an unknown or
// misplaced field is an error) into its kind's type.
func decode(t *testing.T, files map[string]string) rendered {
	t.Helper()
	var out rendered
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, name := range names {
		if !strings.HasSuffix(name, ".yaml") {
			continue
		}
		out.raw += files[name]
		r := yaml.NewYAMLReader(bufio.NewReader(strings.NewReader(files[name])))
		for {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if len(bytes.TrimSpace(doc)) == 0 {
				continue
			}
			var head struct{ Kind string }
			if err := sigsyaml.Unmarshal(doc, &head); err != nil {
				t.Fatalf("%s: %v\n%s", name, err, doc)
			}
			var obj any
			switch head.Kind {
			case "Deployment":
				out.deployment = &appsv1.Deployment{}
				obj = out.deployment
			case "Job":
				out.job = &batchv1.Job{}
				obj = out.job
			case "Service":
				out.service = &corev1.Service{}
				obj = out.service
			case "ServiceAccount":
				out.sa = &corev1.ServiceAccount{}
				obj = out.sa
			case "PodDisruptionBudget":
				out.pdb = &policyv1.PodDisruptionBudget{}
				obj = out.pdb
			case "HorizontalPodAutoscaler":
				out.hpa = &autoscalingv2.HorizontalPodAutoscaler{}
				obj = out.hpa
			case "NetworkPolicy":
				out.netpol = &networkingv1.NetworkPolicy{}
				obj = out.netpol
			case "ServiceMonitor":
				out.monitor = &serviceMonitor{}
				obj = out.monitor
			default:
				t.Fatalf("%s: a %q the test does not know", name, head.Kind)
			}
			if err := sigsyaml.UnmarshalStrict(doc, obj); err != nil {
				t.Fatalf("%s: not a valid %s: %v\n%s", name, head.Kind, err, doc)
			}
		}
	}
	return out
}

// TestChartRenders (issue 38): on every values file the chart renders
// valid Kubernetes objects, and they are what docs/operations.md says: a
// non-root, read-only container with both listeners probed, secrets only by
// reference, the memory budget and GOMEMLIMIT, migrations as a pre-install
// and pre-upgrade hook, a PodDisruptionBudget, an autoscaler when asked, a
// NetworkPolicy letting out only DNS, the database and HTTPS.
func TestChartRenders(t *testing.T) {
	t.Parallel()
	c := load(t)
	for _, file := range []string{"minimal.yaml", "production.yaml", "cloudnativepg.yaml", "minimal-off.yaml"} {
		t.Run(file, func(t *testing.T) {
			t.Parallel()
			values := valuesFile(t, file)
			files, err := render(c, values)
			if err != nil {
				t.Fatal(err)
			}
			r := decode(t, files)
			d := r.deployment
			if d == nil || r.service == nil {
				t.Fatalf("no Deployment or Service:\n%s", r.raw)
			}
			pod := d.Spec.Template.Spec
			if len(pod.Containers) != 1 {
				t.Fatalf("%d containers", len(pod.Containers))
			}
			ct := pod.Containers[0]
			sc := ct.SecurityContext
			if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
				sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || len(sc.Capabilities.Drop) != 1 {
				t.Errorf("the container's security context: %+v", sc)
			}
			if ct.LivenessProbe == nil || ct.LivenessProbe.HTTPGet.Path != "/healthz" || ct.LivenessProbe.HTTPGet.Port.String() != "internal" ||
				ct.ReadinessProbe == nil || ct.ReadinessProbe.HTTPGet.Path != "/readyz" || ct.ReadinessProbe.HTTPGet.Port.String() != "http" {
				t.Errorf("probes: liveness %+v, readiness %+v", ct.LivenessProbe, ct.ReadinessProbe)
			}
			env := map[string]string{}
			for _, e := range ct.Env {
				if e.ValueFrom != nil {
					t.Errorf("env %s from elsewhere: secrets come by envFrom only", e.Name)
				}
				env[e.Name] = e.Value
			}
			if len(ct.EnvFrom) != 1 || ct.EnvFrom[0].SecretRef == nil || ct.EnvFrom[0].SecretRef.Name != values["existingSecret"] {
				t.Errorf("envFrom: %+v", ct.EnvFrom)
			}
			if env["CONNECTD_PUBLIC_URL"] != values["publicURL"] || env["CONNECTD_INTERNAL_ADDR"] != ":9090" || env["GOMEMLIMIT"] == "" {
				t.Errorf("env: %v", env)
			}
			for _, name := range []string{"CONNECTD_DATABASE_URL", "CONNECTD_VAULT_KEYS", "CONNECTD_SESSION_KEYS"} {
				if _, ok := env[name]; ok {
					t.Errorf("%s is a value in the manifest", name)
				}
			}
			// The memory budget: GOMEMLIMIT about 18 MB under the limit.
			limit := ct.Resources.Limits.Memory().Value()
			if limit == 0 || env["GOMEMLIMIT"] == "" {
				t.Errorf("no memory limit or GOMEMLIMIT: %v %q", ct.Resources.Limits, env["GOMEMLIMIT"])
			} else if gml := mib(t, env["GOMEMLIMIT"]); gml >= limit || limit-gml > 24<<20 {
				t.Errorf("GOMEMLIMIT %s against a %d MiB limit: keep it about 18 MB below", env["GOMEMLIMIT"], limit>>20)
			}
			if pod.SecurityContext == nil || pod.SecurityContext.RunAsNonRoot == nil || !*pod.SecurityContext.RunAsNonRoot ||
				pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
				t.Errorf("the pod's security context: %+v, automount %v", pod.SecurityContext, pod.AutomountServiceAccountToken)
			}
			if p, ok := values["providersConfigMap"].(string); ok && p != "" && env["CONNECTD_PROVIDERS_FILE"] != "/etc/connectd/providers.json" {
				t.Errorf("the providers ConfigMap is not named by CONNECTD_PROVIDERS_FILE: %v", env)
			}

			off := file == "minimal-off.yaml"
			if (r.job == nil) != off || (r.pdb == nil) != off || (r.netpol == nil) != off || (r.sa == nil) != off {
				t.Fatalf("migrations %v, PDB %v, NetworkPolicy %v, ServiceAccount %v with %s", r.job != nil, r.pdb != nil,
					r.netpol != nil, r.sa != nil, file)
			}
			if r.job != nil {
				if r.job.Annotations["helm.sh/hook"] != "pre-install,pre-upgrade" ||
					!slices.Equal(r.job.Spec.Template.Spec.Containers[0].Args, []string{"migrate", "up"}) ||
					r.job.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyNever {
					t.Errorf("the migration Job: %+v", r.job)
				}
			}
			if r.netpol != nil {
				var ports []string
				for _, e := range r.netpol.Spec.Egress {
					for _, p := range e.Ports {
						ports = append(ports, p.Port.String())
					}
				}
				want := []string{"443", "53", "53", "5432"}
				if file == "production.yaml" {
					want = []string{"443", "53", "53", "6432", "5432"} // PgBouncer, and the database for LISTEN (extraEgress)
				}
				slices.Sort(ports)
				if !slices.Equal(ports, sortedCopy(want)) {
					t.Errorf("egress ports %v, want %v: DNS, the database and HTTPS only", ports, want)
				}
			}
			autoscale := file == "production.yaml"
			if (r.hpa != nil) != autoscale || (d.Spec.Replicas == nil) != autoscale || (r.monitor != nil) != autoscale {
				t.Errorf("autoscaling %v, replicas %v, ServiceMonitor %v with %s", r.hpa != nil, d.Spec.Replicas, r.monitor != nil, file)
			}
			if r.monitor != nil && (r.monitor.Spec.Endpoints[0].Port != "internal" || r.monitor.Spec.Endpoints[0].Path != "/metrics") {
				t.Errorf("the ServiceMonitor: %+v", r.monitor.Spec)
			}
		})
	}
}

// TestChartRefusesBadValues: values the schema or the templates refuse are
// refused with a message naming them, and nothing renders.
func TestChartRefusesBadValues(t *testing.T) {
	t.Parallel()
	c := load(t)
	for _, tt := range []struct {
		name   string
		values map[string]any
		says   string
	}{
		{"no public URL", map[string]any{"existingSecret": "s"}, "publicURL"},
		{"no secret", map[string]any{"publicURL": "https://connect.example.com"}, "existingSecret"},
		{"an http public URL", map[string]any{"publicURL": "http://connect.example.com", "existingSecret": "s"}, "publicURL"},
		{"a secret as a value", map[string]any{"publicURL": "https://connect.example.com", "existingSecret": "s",
			"env": map[string]any{"CONNECTD_VAULT_KEYS": "1:abc"}}, "CONNECTD_VAULT_KEYS"},
		{"a bad GOMEMLIMIT", map[string]any{"publicURL": "https://connect.example.com", "existingSecret": "s", "goMemLimit": "46M"}, "goMemLimit"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := render(c, tt.values)
			if err == nil || !strings.Contains(err.Error(), tt.says) {
				t.Fatalf("render: %v, want an error naming %s", err, tt.says)
			}
		})
	}
}

func sortedCopy(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }

// mib is a GOMEMLIMIT value ("46MiB") in bytes.
func mib(t *testing.T, v string) int64 {
	t.Helper()
	var n int64
	if _, err := fmt.Sscanf(v, "%dMiB", &n); err != nil {
		t.Fatalf("GOMEMLIMIT %q: %v", v, err)
	}
	return n << 20
}
