package mariadb

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Defaults of Options.
const (
	// DefaultStartTimeout bounds the wait for a started server to answer.
	DefaultStartTimeout = 60 * time.Second
	// DefaultBindAddress is the address a started server listens on.
	DefaultBindAddress = "127.0.0.1"
	// stopTimeout bounds the wait for a clean shutdown after SIGTERM before SIGKILL.
	stopTimeout = 60 * time.Second
	// portAttempts is how many free ports Start tries when Options.Port is 0 and another
	// process takes the chosen port first.
	portAttempts = 3
)

// Errors of this package.
var (
	// ErrNoBinaries: the server or the install program is not installed (FindBinaries, Start).
	ErrNoBinaries = errors.New("mariadb: mariadbd/mysqld or mariadb-install-db not found")
	// ErrPortInUse: a server could not bind its port (Start), or a port is taken
	// (ReplicatedOptions.CheckPorts).
	ErrPortInUse = errors.New("mariadb: port in use")
	// ErrExited: Instance.Stop found the server already exited by itself (a crash or a kill
	// from outside).
	ErrExited = errors.New("mariadb: server had exited")
	// ErrNotResumable: OpenReplicated found a directory whose set it cannot start again (of
	// another shape, a member's data missing or another member's, no master to recover).
	ErrNotResumable = errors.New("mariadb: cannot resume the replicated set")
)

// Options configures Start. The zero value starts a server in a new temporary directory on a
// free port of 127.0.0.1.
type Options struct {
	// DataDir is the server's data directory. Empty: a new directory under os.TempDir, removed
	// when the instance is stopped or killed. Otherwise the directory is used as is: it is
	// initialized (mariadb-install-db) only if it holds no "mysql" directory yet, so a stopped
	// or killed server can be started again on its data, and it is never removed.
	DataDir string
	// Port is the TCP port to listen on; 0 picks a free one.
	Port int
	// BindAddress is the address to listen on (default 127.0.0.1). A wildcard address
	// (0.0.0.0, ::) is reached through 127.0.0.1 in DSN.
	BindAddress string
	// Args are extra server flags, placed after the defaults so they override them, e.g.
	// "--log-bin=mysql-bin", "--server-id=2", "--binlog-format=ROW".
	Args []string
	// ServerBinary and InstallBinary override the lookup of mariadbd (or mysqld) and
	// mariadb-install-db (or mysql_install_db).
	ServerBinary, InstallBinary string
	// StartTimeout bounds the wait for the server to answer a ping (default 60 s).
	StartTimeout time.Duration
}

// Instance is a server started by Start. Its methods are safe for concurrent use.
type Instance struct {
	dataDir   string
	removeDir string // the temporary directory to remove once the server is gone, or ""
	tmpDir    string // the server's private tmpdir, removed once the server is gone
	host      string
	port      int
	cmd       *exec.Cmd
	done      chan struct{} // closed when the process has exited
	waitErr   error         // the process's exit status; read after done is closed

	mu      sync.Mutex
	stopped bool // Stop or Kill signalled the process
}

// FindBinaries returns the paths of the server (mariadbd, else mysqld) and of the install
// program (mariadb-install-db, else mysql_install_db), looked up in PATH and then in /usr/sbin,
// /usr/local/sbin, /usr/bin, /usr/local/bin and /usr/local/mysql/bin. The error wraps
// ErrNoBinaries.
func FindBinaries() (server, install string, err error) {
	server, install = lookBinary("mariadbd", "mysqld"), lookBinary("mariadb-install-db", "mysql_install_db")
	if server == "" || install == "" {
		return "", "", fmt.Errorf("%w (looked in PATH and /usr/sbin, /usr/local/sbin, /usr/local/mysql/bin)", ErrNoBinaries)
	}
	return server, install, nil
}

func lookBinary(names ...string) string {
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
		for _, dir := range []string{"/usr/sbin", "/usr/local/sbin", "/usr/bin", "/usr/local/bin", "/usr/local/mysql/bin"} {
			p := filepath.Join(dir, n)
			if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
				return p
			}
		}
	}
	return ""
}

// Start initializes a data directory if needed and starts a server on it, returning once the
// server answers a ping as root (no password) over TCP. It blocks for a few seconds; ctx and
// Options.StartTimeout bound the wait. On failure the server is killed and the error quotes
// the tail of its logs. The server runs until Stop or Kill, or until the process that started
// it exits (Linux: it gets SIGTERM then).
func Start(ctx context.Context, opts Options) (*Instance, error) {
	server, install, err := FindBinaries()
	if opts.ServerBinary != "" {
		server = opts.ServerBinary
	}
	if opts.InstallBinary != "" {
		install = opts.InstallBinary
	}
	if server == "" || install == "" {
		return nil, err
	}
	if opts.BindAddress == "" {
		opts.BindAddress = DefaultBindAddress
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = DefaultStartTimeout
	}
	dataDir, removeDir := opts.DataDir, ""
	if dataDir == "" {
		dir, err := os.MkdirTemp("", "mariadb-")
		if err != nil {
			return nil, fmt.Errorf("mariadb: %w", err)
		}
		dataDir, removeDir = filepath.Join(dir, "data"), dir
	} else if dataDir, err = filepath.Abs(dataDir); err != nil {
		return nil, fmt.Errorf("mariadb: %w", err)
	}
	fail := func(err error) (*Instance, error) {
		if removeDir != "" {
			_ = os.RemoveAll(removeDir)
		}
		return nil, err
	}
	if err := initDataDir(ctx, install, dataDir); err != nil {
		return fail(err)
	}
	for attempt := 1; ; attempt++ {
		port := opts.Port
		if port == 0 {
			if port, err = freePort(opts.BindAddress); err != nil {
				return fail(err)
			}
		}
		inst, err := launch(ctx, server, dataDir, port, opts)
		if err == nil {
			inst.removeDir = removeDir
			return inst, nil
		}
		if opts.Port != 0 || attempt == portAttempts || !errors.Is(err, ErrPortInUse) {
			return fail(err)
		}
	}
}

// initDataDir runs the install program unless dataDir already holds the system tables.
func initDataDir(ctx context.Context, install, dataDir string) error {
	if fi, err := os.Stat(filepath.Join(dataDir, "mysql")); err == nil && fi.IsDir() {
		return nil
	}
	if err := os.MkdirAll(dataDir, 0o750); err != nil {
		return fmt.Errorf("mariadb: %w", err)
	}
	tmpDir, err := os.MkdirTemp("", "mariadb-tmp-") // see launch
	if err != nil {
		return fmt.Errorf("mariadb: %w", err)
	}
	defer os.RemoveAll(tmpDir)
	args := []string{"--no-defaults", "--datadir=" + dataDir, "--tmpdir=" + tmpDir,
		"--auth-root-authentication-method=normal", "--skip-test-db", "--innodb-log-file-size=16M"}
	if os.Geteuid() == 0 {
		args = append(args, "--user=root")
	}
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, install, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	_ = os.WriteFile(filepath.Join(dataDir, "install.log"), out.Bytes(), 0o640)
	if err != nil {
		return fmt.Errorf("mariadb: %s %s: %w\n%s", install, strings.Join(args, " "), err, tailLines(out.Bytes(), 30))
	}
	return nil
}

// freePort returns a TCP port nobody listens on at the moment.
func freePort(bind string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(bind, "0"))
	if err != nil {
		return 0, fmt.Errorf("mariadb: find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// launch starts the server on dataDir and port and waits until it answers.
func launch(ctx context.Context, server, dataDir string, port int, opts Options) (*Instance, error) {
	socket := filepath.Join(dataDir, "mysqld.sock")
	if len(socket) > 100 { // sun_path holds 108 bytes
		socket = filepath.Join(os.TempDir(), fmt.Sprintf("mariadb-%d-%d.sock", os.Getpid(), port))
	}
	// A private tmpdir, outside the data directory (where a directory is a database): at
	// startup the server deletes every "#sql*" file in its tmpdir, which in a shared /tmp are
	// the live temporary tables of other servers.
	tmpDir, err := os.MkdirTemp("", "mariadb-tmp-")
	if err != nil {
		return nil, fmt.Errorf("mariadb: %w", err)
	}
	args := []string{
		"--no-defaults", // must come first
		"--datadir=" + dataDir,
		"--tmpdir=" + tmpDir,
		"--port=" + strconv.Itoa(port),
		"--bind-address=" + opts.BindAddress,
		"--socket=" + socket,
		"--pid-file=" + filepath.Join(dataDir, "mysqld.pid"),
		"--log-error=" + filepath.Join(dataDir, "error.log"),
		"--innodb-flush-log-at-trx-commit=2",
		"--innodb-buffer-pool-size=128M",
		"--innodb-log-file-size=16M",
		"--skip-name-resolve",
		"--max-connections=500",
	}
	if os.Geteuid() == 0 {
		args = append(args, "--user=root")
	}
	args = append(args, opts.Args...)
	console, err := os.OpenFile(filepath.Join(dataDir, "console.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		_ = os.RemoveAll(tmpDir)
		return nil, fmt.Errorf("mariadb: %w", err)
	}
	cmd := exec.Command(server, args...)
	cmd.Stdout, cmd.Stderr = console, console
	// Die with the test process (SIGTERM) even if nobody calls Stop. The parent-death signal
	// follows the OS thread that started the child, so that thread stays locked to the
	// goroutine that waits for the child and exits only after it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM, Setpgid: true}
	inst := &Instance{dataDir: dataDir, tmpDir: tmpDir, host: dialHost(opts.BindAddress), port: port, cmd: cmd, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		if err := cmd.Start(); err != nil {
			started <- err
			console.Close()
			return
		}
		started <- nil
		inst.waitErr = cmd.Wait()
		console.Close()
		close(inst.done)
	}()
	if err := <-started; err != nil {
		_ = os.RemoveAll(tmpDir)
		return nil, fmt.Errorf("mariadb: start %s: %w", server, err)
	}
	if err := inst.waitReady(ctx, opts.StartTimeout); err != nil {
		_ = inst.Kill()
		msg := inst.logTail()
		if strings.Contains(msg, "Address already in use") || strings.Contains(msg, "Bind on TCP/IP port") {
			err = fmt.Errorf("%w: %d: %w", ErrPortInUse, port, err)
		}
		return nil, fmt.Errorf("%w\n%s", err, msg)
	}
	return inst, nil
}

// dialHost is the host that reaches a server bound to bind: bind itself, or 127.0.0.1 for a
// wildcard address (0.0.0.0, ::, *).
func dialHost(bind string) string {
	if ip := net.ParseIP(bind); ip != nil && ip.IsUnspecified() || bind == "*" {
		return "127.0.0.1"
	}
	return bind
}

// waitReady pings the server until it answers, exits, or the timeout or ctx ends.
func (i *Instance) waitReady(ctx context.Context, timeout time.Duration) error {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr, cfg.Timeout = "root", "tcp", i.Addr(), time.Second
	cfg.Logger = log.New(io.Discard, "", 0) // connection noise while the server starts
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return fmt.Errorf("mariadb: %w", err)
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		var pidFile string
		err = db.QueryRowContext(pctx, "SELECT @@pid_file").Scan(&pidFile)
		pcancel()
		if err == nil {
			// Another server (started concurrently on the same free port) may be the one
			// answering: this one then fails to bind and exits.
			want, _ := filepath.Abs(filepath.Join(i.dataDir, "mysqld.pid"))
			if filepath.Clean(pidFile) != want {
				return fmt.Errorf("%w: %d answered by another server (pid file %s)", ErrPortInUse, i.port, pidFile)
			}
			return nil
		}
		select {
		case <-i.done:
			return fmt.Errorf("mariadb: server on port %d exited during startup: %v", i.port, i.waitErr)
		case <-ctx.Done():
			return fmt.Errorf("mariadb: server on port %d did not answer within %v: %w (last ping: %w)", i.port, timeout, ctx.Err(), err)
		case <-tick.C:
		}
	}
}

// DSN returns a go-sql-driver/mysql DSN of the server for root, with no database:
// "root@tcp(127.0.0.1:PORT)/".
func (i *Instance) DSN() string { return "root@tcp(" + i.Addr() + ")/" }

// Addr returns the server's host:port.
func (i *Instance) Addr() string { return net.JoinHostPort(i.host, strconv.Itoa(i.port)) }

// Port returns the server's TCP port.
func (i *Instance) Port() int { return i.port }

// DataDir returns the server's data directory (gone after Stop or Kill if it was temporary).
func (i *Instance) DataDir() string { return i.dataDir }

// ErrorLog returns the path of the server's error log, in the data directory.
func (i *Instance) ErrorLog() string { return filepath.Join(i.dataDir, "error.log") }

// Pid returns the server's process id.
func (i *Instance) Pid() int { return i.cmd.Process.Pid }

// Done is closed when the server process has exited, for whatever reason.
func (i *Instance) Done() <-chan struct{} { return i.done }

// Stop shuts the server down cleanly (SIGTERM), waits for it to exit (killing it after 60 s)
// and removes its data directory if Start created it. It returns an error if the server had
// already exited by itself (wrapping ErrExited), did not exit cleanly, or had to be killed; the
// error quotes its log. Stop and Kill are idempotent: once the server is gone they return nil.
func (i *Instance) Stop() error { return i.stop(syscall.SIGTERM) }

// Kill kills the server (SIGKILL), as a crash would, waits for it to exit and removes its data
// directory if Start created it (otherwise the data stays, for a restart to recover).
func (i *Instance) Kill() error { return i.stop(syscall.SIGKILL) }

func (i *Instance) stop(sig syscall.Signal) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.stopped {
		<-i.done
		return nil
	}
	i.stopped = true
	var err error
	select {
	case <-i.done:
		if sig != syscall.SIGKILL {
			err = fmt.Errorf("%w: port %d, %v\n%s", ErrExited, i.port, i.waitErr, i.logTail())
		}
	default:
		if serr := i.cmd.Process.Signal(sig); serr != nil && !errors.Is(serr, os.ErrProcessDone) {
			err = fmt.Errorf("mariadb: signal server: %w", serr)
		}
		select {
		case <-i.done:
			if sig != syscall.SIGKILL && i.waitErr != nil {
				err = fmt.Errorf("mariadb: server on port %d exited with %v\n%s", i.port, i.waitErr, i.logTail())
			}
		case <-time.After(stopTimeout):
			_ = i.cmd.Process.Kill()
			<-i.done
			err = fmt.Errorf("mariadb: server on port %d did not stop within %v; killed\n%s", i.port, stopTimeout, i.logTail())
		}
	}
	for _, dir := range []string{i.tmpDir, i.removeDir} {
		if dir == "" {
			continue
		}
		if rerr := os.RemoveAll(dir); rerr != nil && err == nil {
			err = fmt.Errorf("mariadb: %w", rerr)
		}
	}
	return err
}

// logTail returns the last lines of the server's error log and console output.
func (i *Instance) logTail() string {
	var b strings.Builder
	for _, name := range []string{"error.log", "console.log"} {
		data, err := os.ReadFile(filepath.Join(i.dataDir, name))
		if err != nil || len(bytes.TrimSpace(data)) == 0 {
			continue
		}
		fmt.Fprintf(&b, "--- tail of %s:\n%s\n", filepath.Join(i.dataDir, name), tailLines(data, 30))
	}
	return b.String()
}

// tailLines returns the last n lines of data.
func tailLines(data []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
