// A toolhost tool plugin written in Go, built with upstream Go
// (GOOS=wasip1 GOARCH=wasm, -buildmode=c-shared) and the Go bindings of
// `wit-bindgen go` for the `tool-plugin` world of wit/plugin.wit, then made
// into a component with `wasm-tools component embed` and `component new`
// (the WASI preview1 reactor adapter). `cargo xtask plugins-foreign` (and
// `cargo xtask test`) builds it into target/plugins-go/file-digest.wasm.
//
// The generated bindings expect the exports in the package
// `export_toolhost_plugin_tool` of the module `wit_component`: this file is
// copied there, beside the generated code, at build time.
//
// Two tools: `sha256` returns structured output (declared by its output
// schema), and `head_lines` reads a file the host granted (WASI preopened
// directories: the plugin sees nothing else).
package export_toolhost_plugin_tool

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"io"
	"os"
	"strings"
	"syscall"

	witTypes "go.bytecodealliance.org/pkg/wit/types"
	"wit_component/toolhost_plugin_host"
	. "wit_component/toolhost_plugin_types"
)

// The longest line `head_lines` returns whole; longer lines are cut.
const maxLine = 64 * 1024

// `head_lines` stops once it has read this many bytes of lines.
const maxOutput = 1024 * 1024

// Describe lists the plugin's tools. The host calls it once, at load time.
func Describe() []ToolSpec {
	return []ToolSpec{
		{
			Name:        "sha256",
			Description: "Computes the SHA-256 digest of a text (UTF-8 bytes), in hexadecimal.",
			InputSchema: `{"type": "object", "properties": {"text": {"type": "string", "description": "The text."}}, "required": ["text"], "additionalProperties": false}`,
			Annotations: Annotations{ReadOnly: true, Idempotent: true},
			OutputSchema: witTypes.Some(`{"type": "object", "properties": {` +
				`"sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"}, ` +
				`"bytes": {"type": "integer", "minimum": 0}}, ` +
				`"required": ["sha256", "bytes"]}`),
		},
		{
			Name:        "head_lines",
			Description: "Reads the first lines of a text file in a directory the host granted.",
			InputSchema: `{"type": "object", "properties": {` +
				`"path": {"type": "string", "description": "The file, absolute or relative to the granted directory."}, ` +
				`"count": {"type": "integer", "minimum": 1, "maximum": 1000, "description": "How many lines (default 10)."}}, ` +
				`"required": ["path"], "additionalProperties": false}`,
			Annotations:  Annotations{ReadOnly: true, Idempotent: true},
			OutputSchema: witTypes.None[string](),
		},
	}
}

// Execute runs the tool `name`. The host has already validated `args`
// against the tool's input schema.
func Execute(cx CallContext, name string, args string) witTypes.Result[ToolOutput, ToolError] {
	switch name {
	case "sha256":
		return digest(args)
	case "head_lines":
		return headLines(args)
	default:
		return failed(fmt.Sprintf("unknown tool %q", name))
	}
}

func digest(args string) witTypes.Result[ToolOutput, ToolError] {
	var in struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal([]byte(args), &in); err != nil {
		return invalid(fmt.Sprintf("arguments: %v", err))
	}
	sum := sha256.Sum256([]byte(in.Text))
	hexSum := hex.EncodeToString(sum[:])
	structured, err := json.Marshal(map[string]any{"sha256": hexSum, "bytes": len(in.Text)})
	if err != nil {
		return failed(err.Error())
	}
	return ok(ToolOutput{
		Output:     hexSum,
		Details:    witTypes.None[string](),
		Structured: witTypes.Some(string(structured)),
	})
}

func headLines(args string) witTypes.Result[ToolOutput, ToolError] {
	in := struct {
		Path  string `json:"path"`
		Count int    `json:"count"`
	}{Count: 10}
	if err := json.Unmarshal([]byte(args), &in); err != nil {
		return invalid(fmt.Sprintf("arguments: %v", err))
	}
	if in.Count < 1 || in.Count > 1000 {
		return invalid("count must be between 1 and 1000")
	}
	f, err := os.Open(in.Path)
	// Outside every granted (preopened) directory, Go's wasip1 port answers
	// EBADF: for the model, that file is not there either.
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.EBADF) {
		return invalid(fmt.Sprintf("no file %s in a directory the host granted", in.Path))
	} else if err != nil {
		return failed(fmt.Sprintf("cannot read %s: %v", in.Path, err))
	}
	defer f.Close()
	lines := make([]string, 0, in.Count)
	total := 0
	reader := bufio.NewReaderSize(f, maxLine)
	for len(lines) < in.Count && total < maxOutput {
		line, more, err := reader.ReadLine()
		if errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return failed(fmt.Sprintf("cannot read %s: %v", in.Path, err))
		}
		text := string(line)
		// A line longer than the buffer is cut: skip the rest of it.
		for more && err == nil {
			_, more, err = reader.ReadLine()
		}
		total += len(text) + 1
		lines = append(lines, text)
	}
	toolhost_plugin_host.Log(LogLevel_Debug, fmt.Sprintf("read %d lines of %s", len(lines), in.Path))
	details, _ := json.Marshal(map[string]int{"lines": len(lines)})
	return ok(ToolOutput{
		Output:     strings.Join(lines, "\n"),
		Details:    witTypes.Some(string(details)),
		Structured: witTypes.None[string](),
	})
}

func ok(out ToolOutput) witTypes.Result[ToolOutput, ToolError] {
	return witTypes.Ok[ToolOutput, ToolError](out)
}

func invalid(message string) witTypes.Result[ToolOutput, ToolError] {
	return witTypes.Err[ToolOutput](MakeToolErrorInvalidArguments(message))
}

func failed(message string) witTypes.Result[ToolOutput, ToolError] {
	return witTypes.Err[ToolOutput](MakeToolErrorFailed(message))
}
