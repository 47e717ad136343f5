// A test oracle written for chatlab: executes an Ollama Modelfile TEMPLATE with Go's own
// text/template, preparing the values the way Ollama's template.go Execute does (read from
// Ollama's source; no code copied): the default SYSTEM prepended when the chat has no system
// message, collate() (system texts joined, consecutive same-role messages merged by a blank
// line), the .Messages form when the template mentions Messages, else the legacy
// .System/.Prompt/.Response rounds with the last one cut after its first .Response; the `json`
// func. Input: one JSON object on stdin; output: the rendered prompt on stdout.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/template"
	"text/template/parse"
)

type CallFunction struct {
	Index     int            `json:"index,omitempty"`
	Name      string         `json:"name"`
	Arguments map[string]any `json:"arguments"`
}

type Call struct {
	ID       string       `json:"id,omitempty"`
	Function CallFunction `json:"function"`
}

type Message struct {
	Role       string `json:"role"`
	Content    string `json:"content"`
	Thinking   string `json:"thinking"`
	ToolCalls  []Call `json:"tool_calls"`
	ToolName   string `json:"tool_name"`
	ToolCallID string `json:"tool_call_id"`
}

type Property struct {
	Type        string `json:"type"`
	Items       any    `json:"items,omitempty"`
	Description string `json:"description"`
	Enum        []any  `json:"enum,omitempty"`
}

type Params struct {
	Type       string              `json:"type"`
	Required   []string            `json:"required"`
	Properties map[string]Property `json:"properties"`
}

type Function struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Parameters  Params `json:"parameters"`
}

type Tool struct {
	Type     string   `json:"type"`
	Function Function `json:"function"`
}

type Input struct {
	Template string    `json:"template"`
	System   string    `json:"system"`
	Messages []Message `json:"messages"`
	Tools    []Tool    `json:"tools"`
}

func collate(msgs []Message) (string, []*Message) {
	var system []string
	var out []*Message
	for i := range msgs {
		m := msgs[i]
		if m.Role == "system" {
			system = append(system, m.Content)
		}
		if len(out) > 0 && out[len(out)-1].Role == m.Role && m.Role != "tool" {
			out[len(out)-1].Content += "\n\n" + m.Content
			out[len(out)-1].ToolCalls = append(out[len(out)-1].ToolCalls, m.ToolCalls...)
		} else {
			out = append(out, &m)
		}
	}
	return strings.Join(system, "\n\n"), out
}

// mentions walks the parse tree for a field or variable chain naming `name`.
func mentions(n parse.Node, name string) bool {
	switch x := n.(type) {
	case *parse.ListNode:
		if x == nil {
			return false
		}
		for _, c := range x.Nodes {
			if mentions(c, name) {
				return true
			}
		}
	case *parse.ActionNode:
		return mentions(x.Pipe, name)
	case *parse.PipeNode:
		if x == nil {
			return false
		}
		for _, c := range x.Cmds {
			if mentions(c, name) {
				return true
			}
		}
	case *parse.CommandNode:
		for _, a := range x.Args {
			if mentions(a, name) {
				return true
			}
		}
	case *parse.IfNode:
		return mentions(x.Pipe, name) || mentions(x.List, name) || mentions(x.ElseList, name)
	case *parse.RangeNode:
		return mentions(x.Pipe, name) || mentions(x.List, name) || mentions(x.ElseList, name)
	case *parse.FieldNode:
		for _, id := range x.Ident {
			if id == name {
				return true
			}
		}
	case *parse.VariableNode:
		for _, id := range x.Ident {
			if id == name {
				return true
			}
		}
	case *parse.ChainNode:
		for _, id := range x.Field {
			if id == name {
				return true
			}
		}
		return mentions(x.Node, name)
	}
	return false
}

// cut keeps the template up to (and with) the first action that prints .Response.
func cut(list *parse.ListNode, done *bool) *parse.ListNode {
	out := &parse.ListNode{NodeType: parse.NodeList}
	if list == nil {
		return nil
	}
	for _, n := range list.Nodes {
		if *done {
			break
		}
		switch x := n.(type) {
		case *parse.ActionNode:
			out.Nodes = append(out.Nodes, x)
			if mentions(x, "Response") {
				*done = true
			}
		case *parse.IfNode:
			c := *x
			c.List = cut(x.List, done)
			if !*done {
				c.ElseList = cut(x.ElseList, done)
			}
			out.Nodes = append(out.Nodes, &c)
		case *parse.RangeNode:
			c := *x
			c.List = cut(x.List, done)
			if !*done {
				c.ElseList = cut(x.ElseList, done)
			}
			out.Nodes = append(out.Nodes, &c)
		default:
			out.Nodes = append(out.Nodes, n)
		}
	}
	return out
}

func main() {
	raw, _ := io.ReadAll(os.Stdin)
	var in Input
	if err := json.Unmarshal(raw, &in); err != nil {
		fmt.Fprintln(os.Stderr, "bad input:", err)
		os.Exit(2)
	}
	funcs := template.FuncMap{"json": func(v any) string { b, _ := json.Marshal(v); return string(b) }}
	t, err := template.New("").Option("missingkey=zero").Funcs(funcs).Parse(in.Template)
	if err != nil {
		fmt.Fprintln(os.Stderr, "parse:", err)
		os.Exit(3)
	}
	msgs := in.Messages
	if in.System != "" && (len(msgs) == 0 || msgs[0].Role != "system") {
		msgs = append([]Message{{Role: "system", Content: in.System}}, msgs...)
	}
	system, collated := collate(msgs)
	var b strings.Builder
	if mentions(t.Tree.Root, "Messages") {
		err = t.Execute(&b, map[string]any{"System": system, "Messages": collated, "Tools": in.Tools,
			"Response": "", "Think": false, "ThinkLevel": "", "IsThinkSet": false})
	} else {
		if !mentions(t.Tree.Root, "Response") {
			t, _ = template.New("").Option("missingkey=zero").Funcs(funcs).Parse(in.Template + "{{ .Response }}")
		}
		vals := map[string]any{"System": "", "Prompt": "", "Response": ""}
		run := func(tt *template.Template) {
			if err == nil {
				err = tt.Execute(&b, vals)
			}
			vals = map[string]any{"System": "", "Prompt": "", "Response": ""}
		}
		for _, m := range collated {
			switch m.Role {
			case "system":
				if vals["Prompt"] != "" || vals["Response"] != "" {
					run(t)
				}
				vals["System"] = m.Content
			case "user":
				if vals["Response"] != "" {
					run(t)
				}
				vals["Prompt"] = m.Content
			case "assistant":
				vals["Response"] = m.Content
			}
		}
		done := false
		last, _ := template.New("").Option("missingkey=zero").Funcs(funcs).AddParseTree("", &parse.Tree{Root: cut(t.Tree.Root, &done)})
		run(last)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "execute:", err)
		os.Exit(4)
	}
	fmt.Print(b.String())
}
