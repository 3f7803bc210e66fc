package kubectlplugin

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	appsv1api "github.com/middleware-operator/middleware-operator/api/apps/v1"
	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
)

// session is the connection every command uses, made from the kubeconfig flags.
type session struct {
	loader    clientcmd.ClientConfig
	stdout    io.Writer
	stderr    io.Writer
	colour    bool
	config    *rest.Config
	client    client.Client
	namespace string
}

// connect makes the client and reads the namespace (-n, else the context's).
func (s *session) connect() error {
	cfg, err := s.loader.ClientConfig()
	if err != nil {
		return fmt.Errorf("while reading the kubeconfig: %w", err)
	}
	ns, _, err := s.loader.Namespace()
	if err != nil {
		return fmt.Errorf("while reading the namespace: %w", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: Scheme()})
	if err != nil {
		return fmt.Errorf("while connecting to %s: %w", cfg.Host, err)
	}
	s.config, s.client, s.namespace = cfg, c, ns
	return nil
}

// Scheme has the built-in kinds and the operator's.
func Scheme() *k8sruntime.Scheme {
	scheme := k8sruntime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(appsv1api.AddToScheme(scheme))
	utilruntime.Must(redisv1alpha1.AddToScheme(scheme))
	return scheme
}

// NewCommand is the plugin's root command, kubectl-middleware; colour is used on stdout
// when it is a terminal and NO_COLOR is unset.
func NewCommand(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "kubectl-middleware",
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl middleware"},
		Short:         "Status, backups, restores and bug reports of middleware-operator's custom resources",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	overrides := &clientcmd.ConfigOverrides{}
	root.PersistentFlags().StringVar(&rules.ExplicitPath, "kubeconfig", "", "path to the kubeconfig file")
	clientcmd.BindOverrideFlags(overrides, root.PersistentFlags(), clientcmd.RecommendedConfigOverrideFlags(""))
	s := &session{
		loader: clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides),
		stdout: stdout, stderr: stderr, colour: isTerminal(stdout) && os.Getenv("NO_COLOR") == "",
	}
	root.AddCommand(statusCommand(s), backupCommand(s), restoreCommand(s), reportCommand(s))
	return root
}

// isTerminal says whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}

func statusCommand(s *session) *cobra.Command {
	return &cobra.Command{
		Use:   "status (rediscluster|rc|appservice|app|cloudmanager|cm) NAME",
		Short: "Show a custom resource's state on one screen",
		Long: "Show a RedisCluster's masters with their slot ranges, memory against maxmemory, nodes with their " +
			"Kubernetes node and zone, replication state, last backup, conditions and recent events; or an " +
			"AppService's or CloudManager's pods, conditions and events.",
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := s.connect(); err != nil {
				return err
			}
			ctx, now, p := cmd.Context(), time.Now(), Palette{On: s.colour}
			var out string
			switch strings.ToLower(args[0]) {
			case "rediscluster", "redisclusters", "rc":
				v, err := LoadRedisClusterView(ctx, s.client, s.namespace, args[1])
				if err != nil {
					return err
				}
				out = RenderRedisCluster(v, p, now)
			case "appservice", "appservices", "app":
				v, err := LoadAppServiceView(ctx, s.client, s.namespace, args[1])
				if err != nil {
					return err
				}
				out = RenderAppService(v, p, now)
			case "cloudmanager", "cloudmanagers", "cm":
				v, err := LoadCloudManagerView(ctx, s.client, s.namespace, args[1])
				if err != nil {
					return err
				}
				out = RenderCloudManager(v, p, now)
			default:
				return fmt.Errorf("unknown kind %q: give rediscluster (rc), appservice (app) or cloudmanager (cm)", args[0])
			}
			_, err := io.WriteString(s.stdout, out)
			return err
		},
	}
}

func backupCommand(s *session) *cobra.Command {
	var name string
	var wait bool
	var timeout time.Duration
	var dest redisv1alpha1.ObjectStore
	cmd := &cobra.Command{
		Use:   "backup CLUSTER",
		Short: "Create a RedisBackup of a RedisCluster now, optionally waiting until it is Completed",
		Long: "Create a RedisBackup of the RedisCluster CLUSTER. Its destination is the flags', else copied from a " +
			"RedisBackupSchedule of the cluster, else from its latest RedisBackup.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := s.connect(); err != nil {
				return err
			}
			ctx, cluster := cmd.Context(), args[0]
			if dest.Endpoint == "" && dest.Bucket == "" && dest.CredentialsSecret == "" {
				chosen, from, err := s.destinationOf(ctx, cluster)
				if err != nil {
					return err
				}
				dest = chosen
				_, _ = fmt.Fprintf(s.stderr, "destination copied from %s: %s/%s\n", from, dest.Endpoint, dest.Bucket)
			}
			if name == "" {
				name = BackupName(cluster, time.Now())
			}
			b := NewBackup(s.namespace, cluster, name, dest)
			if err := s.client.Create(ctx, b); err != nil {
				return fmt.Errorf("while creating RedisBackup %s: %w", name, err)
			}
			_, _ = fmt.Fprintf(s.stdout, "redisbackup.redis.middleware-operator.io/%s created\n", name)
			if !wait {
				return nil
			}
			done, err := WaitBackup(ctx, s.client, client.ObjectKeyFromObject(b), time.Second, timeout, s.stdout)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(s.stdout, "RedisBackup %s: %d keys, %s, at %s\n", name, done.Status.Keys, Bytes(done.Status.Bytes), done.Status.Location)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&name, "name", "", "the RedisBackup's name (default CLUSTER-YYYYMMDD-HHMMSS, UTC)")
	f.BoolVar(&wait, "wait", false, "wait until the backup is Completed (exit 1 when it fails)")
	f.DurationVar(&timeout, "timeout", 10*time.Minute, "how long --wait waits")
	f.StringVar(&dest.Endpoint, "endpoint", "", "the object store's URL, for example https://s3.eu-west-1.amazonaws.com")
	f.StringVar(&dest.Bucket, "bucket", "", "the bucket")
	f.StringVar(&dest.Path, "path", "", "the folder in the bucket the backup's folder goes under")
	f.StringVar(&dest.Region, "region", "", "the bucket's region")
	f.StringVar(&dest.CredentialsSecret, "credentials-secret", "", "the Secret with the store's access key")
	f.StringVar(&dest.CASecret, "ca-secret", "", "the Secret with the CA that signs the store's certificate")
	return cmd
}

// destinationOf chooses the destination of a backup of cluster from its schedules and backups.
func (s *session) destinationOf(ctx context.Context, cluster string) (redisv1alpha1.ObjectStore, string, error) {
	schedules := &redisv1alpha1.RedisBackupScheduleList{}
	if err := s.client.List(ctx, schedules, client.InNamespace(s.namespace)); err != nil {
		return redisv1alpha1.ObjectStore{}, "", fmt.Errorf("while listing RedisBackupSchedules: %w", err)
	}
	backups := &redisv1alpha1.RedisBackupList{}
	if err := s.client.List(ctx, backups, client.InNamespace(s.namespace)); err != nil {
		return redisv1alpha1.ObjectStore{}, "", fmt.Errorf("while listing RedisBackups: %w", err)
	}
	return ChooseDestination(schedules.Items, backups.Items, cluster)
}

func restoreCommand(s *session) *cobra.Command {
	var to, toNamespace string
	var apply bool
	cmd := &cobra.Command{
		Use:   "restore BACKUP --to NAME",
		Short: "Print (or apply) the RedisCluster that restores a RedisBackup",
		Long: "Print the RedisCluster NAME that restores the RedisBackup BACKUP (of -n's namespace) into --to-namespace " +
			"(default: the backup's), with as many masters as the backup has shards; --apply creates it. Into another " +
			"namespace it names the backup's folder, and that namespace needs the store's Secrets of the same names.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := s.connect(); err != nil {
				return err
			}
			ctx := cmd.Context()
			backup := &redisv1alpha1.RedisBackup{}
			if err := s.client.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: args[0]}, backup); err != nil {
				return fmt.Errorf("while reading RedisBackup %s/%s: %w", s.namespace, args[0], err)
			}
			var source *redisv1alpha1.RedisCluster
			rc := &redisv1alpha1.RedisCluster{}
			if err := s.client.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: backup.Spec.Cluster}, rc); err == nil {
				source = rc
			}
			if toNamespace == "" {
				toNamespace = s.namespace
			}
			restored, err := RestoreCluster(backup, source, toNamespace, to)
			if err != nil {
				return err
			}
			if !apply {
				data, err := yaml.Marshal(restored)
				if err != nil {
					return err
				}
				_, err = s.stdout.Write(data)
				return err
			}
			if err := s.client.Create(ctx, restored); err != nil {
				return fmt.Errorf("while creating RedisCluster %s/%s: %w", toNamespace, to, err)
			}
			_, err = fmt.Fprintf(s.stdout, "rediscluster.redis.middleware-operator.io/%s created in %s, restoring %s (%d masters)\n",
				to, toNamespace, backup.Name, len(backup.Status.Shards))
			return err
		},
	}
	cmd.Flags().StringVar(&to, "to", "", "the new RedisCluster's name")
	cmd.Flags().StringVar(&toNamespace, "to-namespace", "", "the new RedisCluster's namespace (default: the backup's)")
	cmd.Flags().BoolVar(&apply, "apply", false, "create the RedisCluster instead of printing it")
	_ = cmd.MarkFlagRequired("to")
	return cmd
}

func reportCommand(s *session) *cobra.Command {
	opts := ReportOptions{}
	var out string
	cmd := &cobra.Command{
		Use:   "report [NAME] -o FILE.tar.gz",
		Short: "Write one archive for a bug report, every Secret value redacted",
		Long: "Write the namespace's custom resources (or those of NAME, with a RedisCluster's backups and schedules), " +
			"their children, their events and the leading operator's recent log (found from its leader-election " +
			"Lease) to a gzipped tar archive. Secrets' values and other secret-looking values are replaced by " +
			"\"<redacted N bytes>\".",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return fmt.Errorf("give the archive's file with -o, for example -o report.tar.gz")
			}
			if err := s.connect(); err != nil {
				return err
			}
			if len(args) == 1 {
				opts.Name = args[0]
			}
			opts.Namespace, opts.Now = s.namespace, time.Now()
			clientset, err := kubernetes.NewForConfig(s.config)
			if err != nil {
				return err
			}
			opts.Logs = func(ctx context.Context, ns, pod, container string, lines int64) ([]byte, error) {
				return clientset.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: container, TailLines: &lines}).DoRaw(ctx)
			}
			f, err := os.Create(out)
			if err != nil {
				return err
			}
			names, err := WriteReport(cmd.Context(), s.client, opts, f)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(s.stdout, "wrote %s: %d files\n", out, len(names))
			return err
		},
	}
	f := cmd.Flags()
	f.StringVarP(&out, "output", "o", "", "the archive to write (.tar.gz)")
	f.StringVar(&opts.OperatorNamespace, "operator-namespace", "", "the operator's namespace (default: found from its Lease)")
	f.StringVar(&opts.LeaseName, "lease", DefaultLeaseName, "the operator's leader election Lease")
	f.Int64Var(&opts.LogLines, "log-lines", 2000, "how many lines of the leader's log to keep")
	return cmd
}
