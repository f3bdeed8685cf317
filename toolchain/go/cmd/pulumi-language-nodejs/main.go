// Command pulumi-language-nodejs is this project's own Node.js language host.
//
// Why it exists: the upstream language host lives in its own Go module
// (github.com/pulumi/pulumi/sdk/nodejs/cmd/pulumi-language-nodejs/v3), which has no
// tags and which the Go module proxy we can reach refuses (403 "This module version is
// not available") for every pseudo-version and commit we tried. The engine itself is
// built unchanged from github.com/pulumi/pulumi/pkg/v3.
//
// The engine starts a language plugin with its own gRPC address as the last argument,
// reads the port we listen on from our stdout, and then calls the LanguageRuntime
// service. The only call that does real work is Run: it starts
// `node <@pulumi/pulumi>/cmd/run` with the flags and environment that entry point
// documents (see its usage text), and maps its exit status back to the engine.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/structpb"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.0.0-dev"

// exitAfterUserActionableMessage is the status @pulumi/pulumi/cmd/run uses when it has
// already reported the error to the engine; the engine must then not report it again.
const exitAfterUserActionableMessage = 32

type host struct {
	pulumirpc.UnimplementedLanguageRuntimeServer
	engineAddress string

	mu          sync.Mutex
	projectRoot string
}

func (h *host) Handshake(_ context.Context, req *pulumirpc.LanguageHandshakeRequest) (*pulumirpc.LanguageHandshakeResponse, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if req.RootDirectory != nil {
		h.projectRoot = *req.RootDirectory
	}
	if req.EngineAddress != "" {
		h.engineAddress = req.EngineAddress
	}
	return &pulumirpc.LanguageHandshakeResponse{}, nil
}

func (h *host) GetPluginInfo(context.Context, *emptypb.Empty) (*pulumirpc.PluginInfo, error) {
	return &pulumirpc.PluginInfo{Version: version}, nil
}

// GetRequiredPackages reports resource plugins the way Node.js packages declare them:
// a package.json with "pulumi": {"resource": true, "name"?, "version"?}.
func (h *host) GetRequiredPackages(_ context.Context, req *pulumirpc.GetRequiredPackagesRequest) (*pulumirpc.GetRequiredPackagesResponse, error) {
	dir := programDirectory(req.GetInfo())
	modules, err := findNodeModules(dir)
	if err != nil {
		return nil, status.Errorf(codes.FailedPrecondition, "%v (run `npm ci` in %s)", err, dir)
	}
	deps, err := pluginPackages(modules)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &pulumirpc.GetRequiredPackagesResponse{Packages: deps}, nil
}

func (h *host) GetRequiredPlugins(ctx context.Context, req *pulumirpc.GetRequiredPluginsRequest) (*pulumirpc.GetRequiredPluginsResponse, error) {
	resp, err := h.GetRequiredPackages(ctx, &pulumirpc.GetRequiredPackagesRequest{Info: req.GetInfo()})
	if err != nil {
		return nil, err
	}
	plugins := make([]*pulumirpc.PluginDependency, 0, len(resp.Packages))
	for _, p := range resp.Packages {
		plugins = append(plugins, &pulumirpc.PluginDependency{Name: p.Name, Kind: p.Kind, Version: p.Version})
	}
	return &pulumirpc.GetRequiredPluginsResponse{Plugins: plugins}, nil
}

func (h *host) Run(ctx context.Context, req *pulumirpc.RunRequest) (*pulumirpc.RunResponse, error) {
	info := req.GetInfo()
	programDir := programDirectory(info)
	modules, err := findNodeModules(programDir)
	if err != nil {
		return &pulumirpc.RunResponse{Error: fmt.Sprintf("%v: run `npm ci` in %s first", err, programDir)}, nil
	}
	runEntry := filepath.Join(modules, "@pulumi", "pulumi", "cmd", "run")
	if _, err := os.Stat(filepath.Join(runEntry, "index.js")); err != nil {
		return &pulumirpc.RunResponse{Error: fmt.Sprintf("@pulumi/pulumi is not installed in %s: run `npm ci`", modules)}, nil
	}
	nodeBin, err := exec.LookPath("node")
	if err != nil {
		return &pulumirpc.RunResponse{Error: "node was not found on PATH: install Node.js 20 or newer"}, nil
	}

	args := []string{runEntry,
		"--monitor=" + req.GetMonitorAddress(),
		"--engine=" + h.engineAddress,
		"--project=" + req.GetProject(),
		"--stack=" + req.GetStack(),
		"--pwd=" + req.GetPwd(),
		"--parallel=" + strconv.Itoa(int(req.GetParallel())),
	}
	if org := req.GetOrganization(); org != "" {
		args = append(args, "--organization="+org)
	}
	if root := rootDirectory(info, h); root != "" {
		args = append(args, "--root-directory="+root)
	}
	if req.GetDryRun() {
		args = append(args, "--dry-run")
	}
	program := req.GetProgram()
	if entry := info.GetEntryPoint(); entry != "" {
		program = filepath.Join(programDir, entry)
	}
	if program == "" {
		program = programDir
	}
	args = append(args, program)
	args = append(args, req.GetArgs()...)

	config, err := json.Marshal(req.GetConfig())
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	secretKeys := req.GetConfigSecretKeys()
	if secretKeys == nil {
		secretKeys = []string{}
	}
	secretJSON, err := json.Marshal(secretKeys)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}

	cmd := exec.CommandContext(ctx, nodeBin, args...)
	cmd.Dir = req.GetPwd()
	cmd.Stdout = os.Stdout
	cmd.Stderr = os.Stderr
	cmd.Env = append(os.Environ(),
		"PULUMI_CONFIG="+string(config),
		"PULUMI_CONFIG_SECRET_KEYS="+string(secretJSON),
	)
	cmd.Env = append(cmd.Env, typescriptEnv(info.GetOptions())...)

	err = cmd.Run()
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		return &pulumirpc.RunResponse{}, nil
	case errors.As(err, &exitErr):
		if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return &pulumirpc.RunResponse{Error: fmt.Sprintf("program was killed by signal %v", ws.Signal())}, nil
		}
		if exitErr.ExitCode() == exitAfterUserActionableMessage {
			return &pulumirpc.RunResponse{Bail: true}, nil
		}
		return &pulumirpc.RunResponse{Error: fmt.Sprintf("program exited with non-zero exit code: %d", exitErr.ExitCode())}, nil
	default:
		return &pulumirpc.RunResponse{Error: fmt.Sprintf("could not start %s: %v", nodeBin, err)}, nil
	}
}

// typescriptEnv maps Pulumi.yaml runtime options onto the variables that
// @pulumi/pulumi/cmd/run reads. TypeScript is on unless `typescript: false`.
func typescriptEnv(options *structpb.Struct) []string {
	opts := options.AsMap()
	env := []string{"PULUMI_NODEJS_TYPESCRIPT=true"}
	if ts, ok := opts["typescript"].(bool); ok && !ts {
		env[0] = "PULUMI_NODEJS_TYPESCRIPT=false"
	}
	if tsconfig, ok := opts["tsconfig"].(string); ok && tsconfig != "" {
		env = append(env, "PULUMI_NODEJS_TSCONFIG_PATH="+tsconfig)
	}
	return env
}

func programDirectory(info *pulumirpc.ProgramInfo) string {
	if dir := info.GetProgramDirectory(); dir != "" {
		return dir
	}
	if dir := info.GetRootDirectory(); dir != "" {
		return dir
	}
	wd, _ := os.Getwd()
	return wd
}

func rootDirectory(info *pulumirpc.ProgramInfo, h *host) string {
	if dir := info.GetRootDirectory(); dir != "" {
		return dir
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.projectRoot
}

// findNodeModules walks up from dir to the nearest node_modules folder, as Node does.
func findNodeModules(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for d := abs; ; d = filepath.Dir(d) {
		candidate := filepath.Join(d, "node_modules")
		if st, err := os.Stat(candidate); err == nil && st.IsDir() {
			return candidate, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no node_modules folder in %s or above it", abs)
		}
	}
}

type packageJSON struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	Pulumi  *struct {
		Resource bool   `json:"resource"`
		Name     string `json:"name"`
		Version  string `json:"version"`
		Server   string `json:"server"`
	} `json:"pulumi"`
}

// pluginPackages lists the resource plugins declared by the top-level packages of a
// node_modules folder (scoped ones included), sorted for a stable answer.
func pluginPackages(modules string) ([]*pulumirpc.PackageDependency, error) {
	var dirs []string
	entries, err := os.ReadDir(modules)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "@") {
			scoped, err := os.ReadDir(filepath.Join(modules, e.Name()))
			if err != nil {
				continue
			}
			for _, s := range scoped {
				dirs = append(dirs, filepath.Join(modules, e.Name(), s.Name()))
			}
		} else if !strings.HasPrefix(e.Name(), ".") {
			dirs = append(dirs, filepath.Join(modules, e.Name()))
		}
	}
	seen := map[string]bool{}
	var deps []*pulumirpc.PackageDependency
	for _, dir := range dirs {
		raw, err := os.ReadFile(filepath.Join(dir, "package.json"))
		if err != nil {
			continue
		}
		var pkg packageJSON
		if json.Unmarshal(raw, &pkg) != nil || pkg.Pulumi == nil || !pkg.Pulumi.Resource {
			continue
		}
		name := pkg.Pulumi.Name
		if name == "" {
			name = strings.TrimPrefix(pkg.Name, "@pulumi/")
		}
		ver := pkg.Pulumi.Version
		if ver == "" {
			ver = pkg.Version
		}
		if !strings.HasPrefix(ver, "v") {
			ver = "v" + ver
		}
		key := name + "@" + ver
		if seen[key] {
			continue
		}
		seen[key] = true
		deps = append(deps, &pulumirpc.PackageDependency{Name: name, Kind: "resource", Version: ver, Server: pkg.Pulumi.Server})
	}
	sort.Slice(deps, func(i, j int) bool { return deps[i].Name+deps[i].Version < deps[j].Name+deps[j].Version })
	return deps, nil
}

// exitWithParent ends the host when the engine that started it is gone (killed with
// SIGKILL, say), so no orphaned language host is left behind.
func exitWithParent(parent int) {
	for range time.Tick(time.Second) {
		if os.Getppid() != parent {
			os.Exit(0)
		}
	}
}

func main() {
	h := &host{}
	for _, arg := range os.Args[1:] {
		if !strings.HasPrefix(arg, "-") {
			h.engineAddress = arg // the engine passes its address last
		}
	}
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintf(os.Stderr, "pulumi-language-nodejs: cannot listen on 127.0.0.1: %v\n", err)
		os.Exit(1)
	}
	server := grpc.NewServer(grpc.MaxRecvMsgSize(400 * 1024 * 1024))
	pulumirpc.RegisterLanguageRuntimeServer(server, h)
	// The engine reads our port from the first line of stdout.
	fmt.Printf("%d\n", listener.Addr().(*net.TCPAddr).Port)
	go exitWithParent(os.Getppid())
	if err := server.Serve(listener); err != nil {
		fmt.Fprintf(os.Stderr, "pulumi-language-nodejs: %v\n", err)
		os.Exit(1)
	}
}
