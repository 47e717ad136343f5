// A test oracle written for chatlab: executes an Ollama Modelfile TEMPLATE with Go's own
// text/template, preparing the values the way Ollama's template.go Execute does (read from
// Ollama's source, commit fb30760 of 2026-08: template/template.go's Execute, collate,
// convertToolsForTemplate and convertMessagesForTemplate, api/types.go's ToolProperty and
// PropertyType; no code copied): the default SYSTEM prepended when the chat has no system
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

// The request side: api.Message / api.Tool as Ollama decodes them (api/types.go's json tags).
type InCall struct {
	ID       string `json:"id,omitempty"`
	Function struct {
		Index     int            `json:"index"`
		Name      string         `json:"name"`
		Arguments map[string]any `json:"arguments"` // an ordered map in Ollama; the template gets ToMap()
	} `json:"function"`
}

type Message struct {
	Role       string   `json:"role"`
	Content    string   `json:"content"`
	Thinking   string   `json:"thinking,omitempty"`
	ToolCalls  []InCall `json:"tool_calls,omitempty"`
	ToolName   string   `json:"tool_name,omitempty"`
	ToolCallID string   `json:"tool_call_id,omitempty"`
}

// PropertyType: a JSON string or list of strings; marshals back to a string when it holds one.
type PropertyType []string

func (pt *PropertyType) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		*pt = []string{s}
		return nil
	}
	var l []string
	err := json.Unmarshal(b, &l)
	*pt = l
	return err
}

func (pt PropertyType) MarshalJSON() ([]byte, error) {
	if len(pt) == 1 {
		return json.Marshal(pt[0])
	}
	return json.Marshal([]string(pt))
}

func (pt PropertyType) String() string {
	if len(pt) == 0 {
		return ""
	}
	if len(pt) == 1 {
		return pt[0]
	}
	return fmt.Sprintf("%v", []string(pt))
}

// OrderedProps: a nested property's properties keep the request's key order (Ollama's orderedmap).
type OrderedProps struct {
	keys []string
	vals map[string]ToolProperty
}

func (o *OrderedProps) UnmarshalJSON(b []byte) error {
	dec := json.NewDecoder(strings.NewReader(string(b)))
	if _, err := dec.Token(); err != nil {
		return err
	}
	o.vals = map[string]ToolProperty{}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return err
		}
		var p ToolProperty
		if err := dec.Decode(&p); err != nil {
			return err
		}
		if _, seen := o.vals[k.(string)]; !seen {
			o.keys = append(o.keys, k.(string))
		}
		o.vals[k.(string)] = p
	}
	return nil
}

func (o OrderedProps) MarshalJSON() ([]byte, error) {
	var b strings.Builder
	b.WriteString("{")
	for i, k := range o.keys {
		if i > 0 {
			b.WriteString(",")
		}
		kb, _ := json.Marshal(k)
		vb, err := json.Marshal(o.vals[k])
		if err != nil {
			return nil, err
		}
		b.Write(kb)
		b.WriteString(":")
		b.Write(vb)
	}
	b.WriteString("}")
	return []byte(b.String()), nil
}

// ToolProperty: the schema keys api.ToolProperty keeps, in its field order; others are dropped.
type ToolProperty struct {
	AnyOf       []ToolProperty `json:"anyOf,omitempty"`
	Type        PropertyType   `json:"type,omitempty"`
	Items       any            `json:"items,omitempty"`
	Description string         `json:"description,omitempty"`
	Enum        []any          `json:"enum,omitempty"`
	Properties  *OrderedProps  `json:"properties,omitempty"`
	Required    []string       `json:"required,omitempty"`
}

type InTool struct {
	Type     string `json:"type"`
	Items    any    `json:"items,omitempty"`
	Function struct {
		Name        string `json:"name"`
		Description string `json:"description,omitempty"`
		Parameters  struct {
			Type       string                  `json:"type"`
			Defs       any                     `json:"$defs,omitempty"`
			Items      any                     `json:"items,omitempty"`
			Required   []string                `json:"required,omitempty"`
			Properties map[string]ToolProperty `json:"properties"` // ordered in Ollama; the template gets ToMap()
		} `json:"parameters"`
	} `json:"function"`
}

// The template side: template.go's templateTool / templateMessage and friends (same fields, tags
// and String methods: JSON for tools, tool lists, arguments and properties; none for a function).
type Args map[string]any

func (a Args) String() string {
	if a == nil {
		return "{}"
	}
	b, _ := json.Marshal(a)
	return string(b)
}

type Props map[string]ToolProperty

func (p Props) String() string {
	if p == nil {
		return "{}"
	}
	b, _ := json.Marshal(p)
	return string(b)
}

type Params struct {
	Type       string   `json:"type"`
	Defs       any      `json:"$defs,omitempty"`
	Items      any      `json:"items,omitempty"`
	Required   []string `json:"required,omitempty"`
	Properties Props    `json:"properties"`
}

type Function struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Parameters  Params `json:"parameters"`
}

type Tool struct {
	Type     string   `json:"type"`
	Items    any      `json:"items,omitempty"`
	Function Function `json:"function"`
}

func (t Tool) String() string { b, _ := json.Marshal(t); return string(b) }

type Tools []Tool

func (t Tools) String() string { b, _ := json.Marshal(t); return string(b) }

type CallFunction struct {
	Index     int
	Name      string
	Arguments Args
}

type Call struct {
	ID       string
	Function CallFunction
}

type TMessage struct {
	Role       string
	Content    string
	Thinking   string
	Images     [][]byte
	ToolCalls  []Call
	ToolName   string
	ToolCallID string
}

type Input struct {
	Template string    `json:"template"`
	System   string    `json:"system"`
	Messages []Message `json:"messages"`
	Tools    []InTool  `json:"tools"`
}

func convertTools(in []InTool) Tools {
	if in == nil { // no tools in the request: a nil slice (json null)
		return nil
	}
	out := make(Tools, len(in))
	for i, t := range in {
		p := t.Function.Parameters
		out[i] = Tool{Type: t.Type, Items: t.Items, Function: Function{Name: t.Function.Name,
			Description: t.Function.Description, Parameters: Params{Type: p.Type, Defs: p.Defs, Items: p.Items,
				Required: p.Required, Properties: Props(p.Properties)}}}
	}
	return out
}

func convertMessages(in []*Message) []*TMessage {
	out := make([]*TMessage, len(in))
	for i, m := range in {
		var calls []Call
		for _, c := range m.ToolCalls {
			calls = append(calls, Call{ID: c.ID, Function: CallFunction{Index: c.Function.Index,
				Name: c.Function.Name, Arguments: Args(c.Function.Arguments)}})
		}
		out[i] = &TMessage{Role: m.Role, Content: m.Content, Thinking: m.Thinking, ToolCalls: calls,
			ToolName: m.ToolName, ToolCallID: m.ToolCallID}
	}
	return out
}

func collate(msgs []Message) (string, []*Message) {
	var system []string
	var out []*Message
	for i := range msgs {
		if msgs[i].Role == "system" {
			system = append(system, msgs[i].Content)
		}
		// merged into the first: only the content grows (its tool calls stay the first's)
		if len(out) > 0 && out[len(out)-1].Role == msgs[i].Role && msgs[i].Role != "tool" {
			out[len(out)-1].Content += "\n\n" + msgs[i].Content
		} else {
			out = append(out, &msgs[i])
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
		err = t.Execute(&b, map[string]any{"System": system, "Messages": convertMessages(collated), "Tools": convertTools(in.Tools),
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
