package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"go.opentelemetry.io/otel"

	"github.com/connectd/connectd/internal/server"
	"github.com/connectd/connectd/internal/tracing"
	"github.com/connectd/connectd/internal/web"
)

func serve(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fset := flag.NewFlagSet("serve", flag.ContinueOnError)
	addr := fset.String("addr", "", "public listen address (overrides CONNECTD_ADDR)")
	internalAddr := fset.String("internal-addr", "", "operators' listen address (overrides CONNECTD_INTERNAL_ADDR)")
	pos, err := parseFlags(fset, "usage: connectd serve [flags]\n"+
		"Serves two listeners:\n"+
		"  public (CONNECTD_ADDR, -addr): the /v1 API and proxy for MCP servers; the connect, sign-in and /account pages\n"+
		"    for users; the admin pages and admin API (/admin, /admin/api); /healthz and /readyz.\n"+
		"  operators' (CONNECTD_INTERNAL_ADDR, -internal-addr; keep it private): /healthz, /readyz, /metrics\n"+
		"    (Prometheus) and /debug/pprof.\n"+
		"Configuration: CONNECTD_* environment variables, see docs/configuration.md.", args, stdout, stderr)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return &usageError{"usage: connectd serve [-addr ADDR] [-internal-addr ADDR] (see connectd serve -h)"}
	}
	cfg, err := loadConfig(getenv, needs{db: true, publicURL: true, keys: true, providers: true})
	if err != nil {
		return err
	}
	if *addr != "" {
		cfg.Addr = *addr
	}
	if *internalAddr != "" {
		cfg.InternalAddr = *internalAddr
	}
	logger := web.NewLogger(stderr, cfg.LogLevel, cfg.LogFormat)

	pool, err := openPool(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	checkDatabase(ctx, pool, logger)
	if cfg.AutoMigrate {
		if err := migrateUp(ctx, pool, logger); err != nil {
			return err
		}
	}

	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on CONNECTD_ADDR %s: %w", cfg.Addr, err)
	}
	iln, err := net.Listen("tcp", cfg.InternalAddr)
	if err != nil {
		ln.Close()
		return fmt.Errorf("listen on CONNECTD_INTERNAL_ADDR %s: %w", cfg.InternalAddr, err)
	}
	// Tracing is set up before anything is traced, and shut down (flushing
	// the spans still queued) after everything that makes spans has ended.
	tr, err := newTracing(ctx, cfg.Tracing, logger)
	if err != nil {
		ln.Close()
		iln.Close()
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := tr.Shutdown(sctx); err != nil {
			logger.WarnContext(sctx, "tracing: spans not exported at shutdown", slog.String("error", err.Error()))
		}
	}()
	sc := cfg.server(pool, logger)
	sc.Tracing = tr.Provider()
	// Built after listening: the dev IdP's back channel needs the real address.
	srv, err := server.New(ctx, sc)
	if err != nil {
		ln.Close()
		iln.Close()
		return err
	}
	defer srv.Close()
	// Notifications, cache invalidations and the periodic sweeps. Run's last
	// act (writing the sampled audit counts) needs the pool, so it must end
	// before the pool closes.
	runCtx, stopRun := context.WithCancel(ctx)
	runDone := make(chan struct{})
	go func() { srv.Run(runCtx); close(runDone) }()
	defer func() { stopRun(); <-runDone }()
	logger.InfoContext(ctx, "listening", slog.String("addr", ln.Addr().String()),
		slog.String("internal_addr", iln.Addr().String()), slog.String("public_url", cfg.PublicURL.String()),
		slog.Bool("dev", cfg.Dev), slog.String("version", buildVersion()), slog.Bool("tracing", sc.Tracing != nil))

	errc := make(chan error, 2)
	go func() {
		errc <- serveHTTP(ctx, newHTTPServer(cfg.HTTP, srv.Public(), logger), ln, cfg.HTTP.ShutdownGrace, logger)
	}()
	go func() {
		errc <- serveHTTP(ctx, newHTTPServer(cfg.HTTP, srv.Internal(), logger), iln, cfg.HTTP.ShutdownGrace, logger)
	}()
	err = errors.Join(<-errc, <-errc)
	logger.InfoContext(context.WithoutCancel(ctx), "stopped")
	return err
}

func newHTTPServer(c HTTPConfig, h http.Handler, logger *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: c.ReadHeaderTimeout,
		ReadTimeout:       c.ReadTimeout,
		WriteTimeout:      c.WriteTimeout,
		IdleTimeout:       c.IdleTimeout,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
}

// serveHTTP serves on ln until ctx is cancelled, then stops accepting and lets
// in-flight requests finish for up to grace before closing what remains.
func serveHTTP(ctx context.Context, srv *http.Server, ln net.Listener, grace time.Duration, logger *slog.Logger) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("http server on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	logger.InfoContext(sctx, "shutting down", slog.String("addr", ln.Addr().String()), slog.Duration("grace", grace))
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
		return fmt.Errorf("shutdown of %s: in-flight requests did not finish within %s", ln.Addr(), grace)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// newTracing builds the tracer provider cfg asks for (none when tracing is
// off). The SDK's own troubles — a collector that is down, a full queue —
// are process-wide in OpenTelemetry's API; they go to logger as warnings,
// never to stderr on their own.
func newTracing(ctx context.Context, cfg tracing.Config, logger *slog.Logger) (*tracing.Tracing, error) {
	if !cfg.Enabled {
		return &tracing.Tracing{}, nil
	}
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		logger.Warn("tracing: export failed", slog.String("component", "otel"), slog.String("error", err.Error()))
	}))
	return tracing.New(ctx, cfg)
}
