package db

import (
	"context"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// traceScope is the instrumentation scope of the statement spans.
const traceScope = "github.com/connectd/connectd/internal/db"

type otelKey struct{}

// startSpan starts a client span for one statement (or batch, or copy) when
// ctx holds a recording span — a traced request or job — from that span's
// own provider; otherwise it returns ctx unchanged, so with tracing off (or
// an unsampled trace) a statement costs one context lookup more. Work that
// is no one's child (River's polling, the sweeps' own queries outside a job)
// makes no span: it would be a root of its own, every second.
//
// The span carries the statement's text (connectd's statements are
// constants whose values travel as parameters) and never a parameter: the
// values are lookup hashes, sealed credentials and user ids.
func startSpan(ctx context.Context, op, sql string) context.Context {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return ctx
	}
	name := op
	if op == "" {
		name = operation(sql)
	}
	attrs := []attribute.KeyValue{attribute.String("db.system.name", "postgresql")}
	if sql != "" {
		attrs = append(attrs, attribute.String("db.query.text", sql))
	}
	if op != "" {
		attrs = append(attrs, attribute.String("db.operation.name", op))
	}
	ctx, span := parent.TracerProvider().Tracer(traceScope).Start(ctx, name,
		trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	return context.WithValue(ctx, otelKey{}, span)
}

// endSpan ends the span startSpan put on ctx, if any. An error is recorded
// by its SQLSTATE only: Postgres's messages may quote a value ("invalid
// input syntax for type uuid: …").
func endSpan(ctx context.Context, err error) {
	span, ok := ctx.Value(otelKey{}).(trace.Span)
	if !ok {
		return
	}
	if err != nil {
		kind := "error"
		var pe *pgconn.PgError
		if errors.As(err, &pe) {
			kind = pe.Code
			span.SetAttributes(attribute.String("db.response.status_code", pe.Code))
		} else if errors.Is(err, context.DeadlineExceeded) {
			kind = "timeout"
		} else if errors.Is(err, context.Canceled) {
			kind = "canceled"
		}
		span.SetAttributes(attribute.String("error.type", kind))
		span.SetStatus(codes.Error, "")
	}
	span.End()
}

// operation is the span name of a statement: the name a leading sqlc
// comment gives it ("-- name: JobGetAvailable :many", River's), else its
// first keyword (SELECT, INSERT, WITH, …), else "query".
func operation(sql string) string {
	s := strings.TrimSpace(sql)
	for strings.HasPrefix(s, "--") { // a leading comment line
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			return "query"
		}
		if name, ok := strings.CutPrefix(strings.TrimSpace(s[2:i]), "name:"); ok {
			if f := strings.Fields(name); len(f) > 0 && len(f[0]) <= 64 {
				return f[0]
			}
		}
		s = strings.TrimSpace(s[i+1:])
	}
	end := strings.IndexFunc(s, func(r rune) bool { return r == ' ' || r == '\n' || r == '\t' || r == '(' || r == ';' })
	if end < 0 {
		end = len(s)
	}
	if end == 0 || end > 16 {
		return "query"
	}
	return strings.ToUpper(s[:end])
}
