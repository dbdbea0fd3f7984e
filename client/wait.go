package client

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// pollWait is how long each long-poll of Wait asks connectd to hold.
const pollWait = 30 * time.Second

// Wait blocks until the elicitation leaves pending (completed, declined,
// expired or failed) and returns its final state. It long-polls connectd
// (GET /v1/elicitations/{id}?wait=…), which answers as soon as the user
// finishes on any replica, and rides out temporary unavailability. It stops
// early only when ctx ends or connectd refuses the call; bound it with a
// context deadline (connectd ends the wait itself when the elicitation
// expires).
func (c *Client) Wait(ctx context.Context, userToken, elicitationID string) (*ElicitationStatus, error) {
	wait := pollWait
	if t := c.hc.Timeout; t > 0 && t-5*time.Second < wait {
		wait = max(t-5*time.Second, time.Second)
	}
	backoff := 250 * time.Millisecond
	for {
		st, err := c.Status(ctx, userToken, elicitationID, wait)
		switch {
		case err == nil && st.Status.Final():
			return st, nil
		case err == nil:
			backoff = 250 * time.Millisecond
			continue
		case ctx.Err() != nil:
			return nil, fmt.Errorf("connectd client: waiting for elicitation: %w", ctx.Err())
		case !retryable(err):
			return nil, err
		}
		// connectd or the network is briefly unavailable: try again.
		var ae *APIError
		delay := backoff
		if errors.As(err, &ae) && ae.RetryAfter > 0 {
			delay = ae.RetryAfter
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("connectd client: waiting for elicitation: %w", ctx.Err())
		case <-t.C:
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

// retryable reports whether an error of a status poll is worth retrying:
// rate limiting, unavailability and transport errors (no APIError at all).
func retryable(err error) bool {
	var ae *APIError
	if !errors.As(err, &ae) {
		return !errors.Is(err, ErrUserToken)
	}
	return errors.Is(err, ErrUnavailable) || errors.Is(err, ErrRateLimited)
}

// Resume is what an MCP server does when the MCP client retries a request
// with the requestState it was given (protocol 2026-07-28): it resolves the
// request_state and, while the elicitation is still pending, waits for it up
// to maxWait (the spec lets the server block until the interaction is done).
// The answer is final, or pending with a fresh RequestState to return in a
// new InputRequiredResult. Refusals of the request_state match
// ErrRequestState.
//
// Resolving consumes the request_state, and the fresh one exists only in
// this answer: keep maxWait well inside the time the MCP client waits for an
// answer (the TypeScript SDK's clients: 60 s by default; the example servers
// hold 30 s), or the client gives up and the answer is lost. Its next retry
// then echoes the spent state (ErrRequestStateReplayed): start the request
// over (token, then RequireConnection), which finds the same pending link.
func (c *Client) Resume(ctx context.Context, userToken, requestState, requestDigest string, maxWait time.Duration) (*ElicitationStatus, error) {
	st, err := c.Resolve(ctx, userToken, requestState, requestDigest)
	if err != nil || st.Status.Final() || maxWait <= 0 {
		return st, err
	}
	wctx, cancel := context.WithTimeout(ctx, maxWait)
	defer cancel()
	final, err := c.Wait(wctx, userToken, st.ID)
	if err != nil {
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			return st, nil // still pending: hand back the fresh request_state
		}
		return nil, err
	}
	return final, nil
}
