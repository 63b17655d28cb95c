package mcp

import (
	"errors"
	"fmt"
)

var (
	// ErrInvalidConfig is returned by ParseSpec, ParseFile, Load,
	// ServerConfig.Validate and Connect for a server configuration that
	// cannot work; the error names the server and the field.
	ErrInvalidConfig = errors.New("mcp: invalid server configuration")
	// ErrServer is returned by Connect when a server cannot be started,
	// reached or listed, and by a tool's Execute when its server cannot
	// be reached; the error names the server.
	ErrServer = errors.New("mcp: server failed")
	// ErrConfig is returned by NewGateway for a GatewayConfig that cannot
	// work; the error names the field.
	ErrConfig = errors.New("mcp: invalid gateway configuration")
	// ErrGatewayClosed is the error of a tools/call that reaches a
	// Gateway after Close began.
	ErrGatewayClosed = errors.New("mcp: gateway closed")
	// ErrNotPaused is returned by Resume when no MCP gateway holds a
	// paused call of the turn (never paused, settled, or timed out).
	ErrNotPaused = errors.New("mcp: no paused call")
	// ErrResumeRefused is returned by Resume when the gateway holding the
	// call refused the resume (no decision for the call, bad input); the
	// error says why.
	ErrResumeRefused = errors.New("mcp: resume refused")
)

// ToolError is a tool result the server marked isError: the model reads
// Text as the tool's error.
type ToolError struct {
	Server, Tool, Text string
}

func (e *ToolError) Error() string {
	if e.Text == "" {
		return fmt.Sprintf("tool %s of MCP server %s failed", e.Tool, e.Server)
	}
	return e.Text
}
