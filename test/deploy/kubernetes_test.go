package deploy

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

const (
	kubernetesDir = repoRoot + "/deploy/kubernetes"
	imageUID      = 65532
)

// manifest is one object of the manifests, decoded into its k8s.io/api type.
type manifest struct {
	file string // relative to deploy/kubernetes
	kind string
	name string
	obj  any
}

// workload is a pod template of a Deployment, Job or CronJob.
type workload struct {
	manifest
	pod *corev1.PodTemplateSpec
}

// loadManifests decodes every object of every .yaml file under
// deploy/kubernetes strictly into its type: a misspelt or misplaced field, or
// a field given twice, fails as the API server's strict field validation
// (kubectl's default) would.
func loadManifests(t *testing.T) []manifest {
	t.Helper()
	var all []manifest
	err := filepath.WalkDir(kubernetesDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") {
			return err
		}
		rel, _ := filepath.Rel(kubernetesDir, path)
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
		for {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(t, err, rel)
			if len(bytes.TrimSpace(stripComments(doc))) == 0 {
				continue
			}
			var tm metav1.TypeMeta
			require.NoError(t, yaml.Unmarshal(doc, &tm), rel)
			var obj any
			switch tm.APIVersion + " " + tm.Kind {
			case "apps/v1 Deployment":
				obj = &appsv1.Deployment{}
			case "batch/v1 Job":
				obj = &batchv1.Job{}
			case "batch/v1 CronJob":
				obj = &batchv1.CronJob{}
			case "v1 Service":
				obj = &corev1.Service{}
			case "v1 ConfigMap":
				obj = &corev1.ConfigMap{}
			case "v1 Secret":
				obj = &corev1.Secret{}
			default:
				t.Fatalf("%s: unexpected object %s %s", rel, tm.APIVersion, tm.Kind)
			}
			// As the API server decodes: field names are case-sensitive
			// (encoding/json's are not), unknown and duplicate fields fail.
			js, err := yaml.YAMLToJSONStrict(doc)
			require.NoError(t, err, "%s: %s", rel, tm.Kind)
			strictErrs, err := sigsjson.UnmarshalStrict(js, obj, sigsjson.DisallowUnknownFields, sigsjson.DisallowDuplicateFields)
			require.NoError(t, err, "%s: %s", rel, tm.Kind)
			require.NoError(t, errors.Join(strictErrs...), "%s: %s", rel, tm.Kind)
			m := manifest{file: rel, kind: tm.Kind, obj: obj}
			m.name = obj.(metav1.Object).GetName()
			require.NotEmpty(t, m.name, "%s: a %s without a name", rel, tm.Kind)
			all = append(all, m)
		}
		return nil
	})
	require.NoError(t, err)
	return all
}

func stripComments(doc []byte) []byte {
	var out []byte
	for line := range bytes.Lines(doc) {
		if !bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) {
			out = append(out, line...)
		}
	}
	return out
}

func workloads(all []manifest) []workload {
	var ws []workload
	for _, m := range all {
		switch o := m.obj.(type) {
		case *appsv1.Deployment:
			ws = append(ws, workload{m, &o.Spec.Template})
		case *batchv1.Job:
			ws = append(ws, workload{m, &o.Spec.Template})
		case *batchv1.CronJob:
			ws = append(ws, workload{m, &o.Spec.JobTemplate.Spec.Template})
		}
	}
	return ws
}

func find[T any](all []manifest, name string) (T, bool) {
	for _, m := range all {
		if o, ok := m.obj.(T); ok && m.name == name {
			return o, true
		}
	}
	var zero T
	return zero, false
}

func TestKubernetes_ManifestsDecodeStrictlyIntoTheirTypes(t *testing.T) {
	t.Parallel()
	all := loadManifests(t)
	var got []string
	for _, m := range all {
		got = append(got, m.file+": "+m.kind+" "+m.name)
	}
	t.Logf("%d objects:\n  %s", len(all), strings.Join(got, "\n  "))
	require.ElementsMatch(t, []string{
		"config.yaml: ConfigMap ledgerq",
		"config.yaml: Secret ledgerq-database",
		"config.yaml: Secret ledgerq-wallet-keystores",
		"config.yaml: Secret ledgerq-wallet-passphrases",
		"migrate-job.yaml: Job ledgerq-migrate",
		"once-cronjob.yaml: CronJob ledgerq-once",
		"serve.yaml: Deployment ledgerq",
		"service.yaml: Service ledgerq",
		"split/api.yaml: Deployment ledgerq-api",
		"split/monitor.yaml: Deployment ledgerq-monitor",
	}, got)
}

func TestKubernetes_NamesAndLabelsAreValid(t *testing.T) {
	t.Parallel()
	check := func(where string, set map[string]string) {
		for k, v := range set {
			require.Empty(t, validation.IsQualifiedName(k), "%s: label key %q", where, k)
			require.Empty(t, validation.IsValidLabelValue(v), "%s: label %s value %q", where, k, v)
		}
	}
	for _, m := range loadManifests(t) {
		where := m.file + ": " + m.name
		require.Empty(t, validation.IsDNS1123Subdomain(m.name), "%s: name", where)
		check(where, m.obj.(metav1.Object).GetLabels())
	}
	for _, w := range workloads(loadManifests(t)) {
		check(w.file+": "+w.name+" pod template", w.pod.Labels)
	}
}

func TestKubernetes_EveryPodRunsHardened(t *testing.T) {
	t.Parallel()
	for _, w := range workloads(loadManifests(t)) {
		where := w.file + ": " + w.name
		spec := &w.pod.Spec
		require.NotNil(t, spec.AutomountServiceAccountToken, where)
		require.False(t, *spec.AutomountServiceAccountToken, "%s: ledgerq never calls the Kubernetes API", where)
		psc := spec.SecurityContext
		require.NotNil(t, psc, where)
		require.True(t, psc.RunAsNonRoot != nil && *psc.RunAsNonRoot, "%s: runAsNonRoot", where)
		require.True(t, psc.RunAsUser != nil && *psc.RunAsUser == imageUID, "%s: runAsUser %d, the image's user", where, imageUID)
		require.True(t, psc.SeccompProfile != nil && psc.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault, "%s: seccomp RuntimeDefault", where)
		require.Len(t, spec.Containers, 1, where)
		for _, c := range spec.Containers {
			where := where + " container " + c.Name
			require.Equal(t, "ledgerq:local", c.Image, where)
			sc := c.SecurityContext
			require.NotNil(t, sc, where)
			require.True(t, sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation, "%s: allowPrivilegeEscalation false", where)
			require.True(t, sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem, "%s: readOnlyRootFilesystem", where)
			require.True(t, sc.Privileged == nil || !*sc.Privileged, "%s: privileged", where)
			require.NotNil(t, sc.Capabilities, where)
			require.Equal(t, []corev1.Capability{"ALL"}, sc.Capabilities.Drop, "%s: capabilities drop ALL", where)
			require.Empty(t, sc.Capabilities.Add, where)
			for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				require.Contains(t, c.Resources.Requests, r, "%s: requests %s", where, r)
			}
			require.Contains(t, c.Resources.Limits, corev1.ResourceMemory, "%s: a memory limit", where)
		}
	}
}

func TestKubernetes_EveryReferenceResolves(t *testing.T) {
	t.Parallel()
	all := loadManifests(t)
	for _, w := range workloads(all) {
		where := w.file + ": " + w.name
		for _, c := range w.pod.Spec.Containers {
			for _, ef := range c.EnvFrom {
				require.NotNil(t, ef.ConfigMapRef, "%s: envFrom", where)
				_, ok := find[*corev1.ConfigMap](all, ef.ConfigMapRef.Name)
				require.True(t, ok, "%s: no ConfigMap %s", where, ef.ConfigMapRef.Name)
			}
			for _, e := range c.Env {
				if e.ValueFrom == nil {
					continue
				}
				switch vf := e.ValueFrom; {
				case vf.SecretKeyRef != nil:
					s, ok := find[*corev1.Secret](all, vf.SecretKeyRef.Name)
					require.True(t, ok, "%s: %s: no Secret %s", where, e.Name, vf.SecretKeyRef.Name)
					require.Contains(t, s.StringData, vf.SecretKeyRef.Key, "%s: %s", where, e.Name)
				case vf.ConfigMapKeyRef != nil:
					cm, ok := find[*corev1.ConfigMap](all, vf.ConfigMapKeyRef.Name)
					require.True(t, ok, "%s: %s: no ConfigMap %s", where, e.Name, vf.ConfigMapKeyRef.Name)
					require.Contains(t, cm.Data, vf.ConfigMapKeyRef.Key, "%s: %s", where, e.Name)
				case vf.ResourceFieldRef != nil:
					require.Equal(t, "GOMEMLIMIT", e.Name, where)
					require.Equal(t, "limits.memory", vf.ResourceFieldRef.Resource, where)
				default:
					t.Fatalf("%s: %s: unexpected valueFrom", where, e.Name)
				}
			}
			mounts := map[string]bool{}
			for _, vm := range c.VolumeMounts {
				require.True(t, vm.ReadOnly, "%s: mount %s must be read-only", where, vm.Name)
				mounts[vm.Name] = true
			}
			for _, v := range w.pod.Spec.Volumes {
				require.True(t, mounts[v.Name], "%s: volume %s is not mounted", where, v.Name)
				require.NotNil(t, v.Secret, "%s: volume %s", where, v.Name)
				_, ok := find[*corev1.Secret](all, v.Secret.SecretName)
				require.True(t, ok, "%s: volume %s: no Secret %s", where, v.Name, v.Secret.SecretName)
			}
		}
	}
}

// podEnv is the environment a container gets from its ConfigMaps and literal
// values (not its Secrets: the test supplies the database).
func podEnv(t *testing.T, all []manifest, c corev1.Container) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, ef := range c.EnvFrom {
		cm, _ := find[*corev1.ConfigMap](all, ef.ConfigMapRef.Name)
		maps.Copy(env, cm.Data)
	}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.ConfigMapKeyRef != nil:
			cm, _ := find[*corev1.ConfigMap](all, e.ValueFrom.ConfigMapKeyRef.Name)
			env[e.Name] = cm.Data[e.ValueFrom.ConfigMapKeyRef.Key]
		}
	}
	return env
}

func TestKubernetes_CommandsAndSettingsAreLedgerqs(t *testing.T) {
	t.Parallel()
	all := loadManifests(t)
	var uses []envUse
	for _, w := range workloads(all) {
		for _, c := range w.pod.Spec.Containers {
			require.Empty(t, c.Command, "%s: the image's entrypoint is ledgerq; give args", w.file)
			env := podEnv(t, all, c)
			checkCommand(t, w.file+": "+w.name, c.Args, env)
			uses = append(uses, envUse{c.Args[0], env})
		}
	}
	checkEnvRead(t, "deploy/kubernetes", uses)
}

func TestKubernetes_ServePodsAreProbedAndDrain(t *testing.T) {
	t.Parallel()
	all := loadManifests(t)
	cm, ok := find[*corev1.ConfigMap](all, "ledgerq")
	require.True(t, ok)
	shutdown, err := time.ParseDuration(cm.Data["LEDGERQ_SHUTDOWN_TIMEOUT"])
	require.NoError(t, err, "LEDGERQ_SHUTDOWN_TIMEOUT in the ConfigMap")
	n := 0
	for _, w := range workloads(all) {
		c := w.pod.Spec.Containers[0]
		if c.Args[0] != "serve" {
			continue
		}
		n++
		where := w.file + ": " + w.name
		require.Equal(t, "Deployment", w.kind, where)
		on, err := roles(c.Args)
		require.NoError(t, err, where)
		require.True(t, on["api"], "%s: without the API there is nothing to probe", where)
		require.Len(t, c.Ports, 1, where)
		require.Equal(t, corev1.ContainerPort{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}, c.Ports[0], where)
		for _, p := range []struct {
			probe *corev1.Probe
			what  string
			path  string
		}{{c.StartupProbe, "startup", "/healthz"}, {c.LivenessProbe, "liveness", "/healthz"}, {c.ReadinessProbe, "readiness", "/readyz"}} {
			require.NotNil(t, p.probe, "%s: a %s probe", where, p.what)
			require.NotNil(t, p.probe.HTTPGet, "%s: %s probe", where, p.what)
			require.Equal(t, p.path, p.probe.HTTPGet.Path, "%s: %s probe", where, p.what)
			require.Equal(t, "http", p.probe.HTTPGet.Port.String(), "%s: %s probe", where, p.what)
		}
		var preStop time.Duration
		if c.Lifecycle != nil && c.Lifecycle.PreStop != nil && c.Lifecycle.PreStop.Sleep != nil {
			preStop = time.Duration(c.Lifecycle.PreStop.Sleep.Seconds) * time.Second
		}
		grace := w.pod.Spec.TerminationGracePeriodSeconds
		require.NotNil(t, grace, where)
		require.Greater(t, time.Duration(*grace)*time.Second, preStop+shutdown,
			"%s: terminationGracePeriodSeconds must exceed the preStop sleep plus LEDGERQ_SHUTDOWN_TIMEOUT, or SIGKILL cuts the drain", where)
		d := w.obj.(*appsv1.Deployment)
		sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		require.NoError(t, err, where)
		require.True(t, sel.Matches(labels.Set(w.pod.Labels)), "%s: the selector does not match the pod template", where)
	}
	require.Equal(t, 3, n, "serve Deployments")
}

func TestKubernetes_ServiceSelectsTheAPIPodsOnly(t *testing.T) {
	t.Parallel()
	all := loadManifests(t)
	svc, ok := find[*corev1.Service](all, "ledgerq")
	require.True(t, ok)
	sel := labels.SelectorFromSet(svc.Spec.Selector)
	var selected []string
	for _, w := range workloads(all) {
		if sel.Matches(labels.Set(w.pod.Labels)) {
			selected = append(selected, w.name)
			ports := map[string]bool{}
			for _, p := range w.pod.Spec.Containers[0].Ports {
				ports[p.Name] = true
			}
			for _, p := range svc.Spec.Ports {
				require.True(t, ports[p.TargetPort.String()], "%s: no port %s", w.name, p.TargetPort.String())
			}
		}
	}
	slices.Sort(selected)
	require.Equal(t, []string{"ledgerq", "ledgerq-api"}, selected, "pods behind the Service")
}

func TestKubernetes_SplitDeploymentsRunEveryRoleOnce(t *testing.T) {
	t.Parallel()
	count := map[string]int{}
	for _, w := range workloads(loadManifests(t)) {
		if !strings.HasPrefix(w.file, "split/") {
			continue
		}
		on, err := roles(w.pod.Spec.Containers[0].Args)
		require.NoError(t, err, w.file)
		for _, role := range []string{"queuer", "submitter", "monitor"} {
			if on[role] {
				count[role]++
			}
		}
	}
	require.Equal(t, map[string]int{"queuer": 1, "submitter": 1, "monitor": 1}, count)
}

func TestKubernetes_JobsMigrateAndRunOnce(t *testing.T) {
	t.Parallel()
	all := loadManifests(t)
	job, ok := find[*batchv1.Job](all, "ledgerq-migrate")
	require.True(t, ok)
	require.Equal(t, []string{"migrate", "up"}, job.Spec.Template.Spec.Containers[0].Args)
	cron, ok := find[*batchv1.CronJob](all, "ledgerq-once")
	require.True(t, ok)
	require.Equal(t, []string{"once"}, cron.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Args)
	require.Equal(t, batchv1.ForbidConcurrent, cron.Spec.ConcurrencyPolicy)
	require.Equal(t, corev1.RestartPolicyNever, cron.Spec.JobTemplate.Spec.Template.Spec.RestartPolicy)
	cm, _ := find[*corev1.ConfigMap](all, "ledgerq")
	require.Equal(t, "false", cm.Data["LEDGERQ_DATABASE_MIGRATE"], "the Job migrates; serve pods wait for it")
}
