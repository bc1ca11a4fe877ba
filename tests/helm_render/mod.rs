//! A renderer for the Go-template subset the chart in `charts/vgpu-scheduler/`
//! uses, standing in for `helm template` (no Helm binary can be installed from the
//! package registries this project builds with).
//!
//! Supported: text with `{{ }}` actions and `{{-`/`-}}` trimming; comments;
//! `if`/`else if`/`else`/`end`, `range` (over lists and maps, with `$v :=` or
//! `$i, $v :=`), `with`/`else`, `define` and `include`; variables (`$`, `$x :=`,
//! `$x =`); fields on `.`, `$` and variables; string, number and boolean literals;
//! parenthesised pipelines; `|` pipes; and the functions `default`, `quote`,
//! `toYaml`, `nindent`, `indent`, `eq`, `ne`, `not`, `and`, `or`, `printf` (`%s`,
//! `%d`, `%v`), `regexReplaceAll`, `required`, `toString`, `empty`, `list`, `dict`, `join`,
//! `include`, `trunc`, `trimSuffix`, `b64enc` and `ternary`. Anything else — an
//! unknown function or keyword, a missing map key (Helm's strict mode) — is an
//! error, so the chart cannot silently use a construct this renderer gets wrong.
//!
//! Rendering follows Helm: templates render in file-name order, files starting
//! with `_` only define templates, `NOTES.txt` is skipped, and `crds/` is not
//! templated. Values are the chart's `values.yaml` deep-merged with overrides.

use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::path::Path;

#[derive(Debug, Clone)]
enum Node {
    Text(String),
    Action(Pipeline),
    If(Vec<(Pipeline, Vec<Node>)>, Vec<Node>),
    Range {
        vars: Vec<String>,
        pipe: Pipeline,
        body: Vec<Node>,
        otherwise: Vec<Node>,
    },
    With(Pipeline, Vec<Node>, Vec<Node>),
}

#[derive(Debug, Clone)]
struct Pipeline {
    /// `$x :=` (declare) or `$x =` (assign).
    assign: Option<(String, bool)>,
    cmds: Vec<Vec<Arg>>,
}

#[derive(Debug, Clone)]
enum Arg {
    Str(String),
    Num(i64),
    Bool(bool),
    Nil,
    /// `.A.B` (empty path: `.`).
    Dot(Vec<String>),
    /// `$x.A.B` (`$` is the root).
    Var(String, Vec<String>),
    Ident(String),
    Sub(Pipeline),
}

/// A template error with the file it came from.
pub type Error = String;

// ---------- lexing ----------

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Text(String),
    Action(String),
}

fn lex(src: &str) -> Result<Vec<Tok>, Error> {
    let mut out = Vec::new();
    let mut rest = src;
    let mut trim_next = false;
    while let Some(start) = rest.find("{{") {
        let mut text = rest[..start].to_string();
        let after = &rest[start + 2..];
        let trim_left = after.starts_with("- ") || after.starts_with("-\n");
        if trim_next {
            text = text.trim_start().to_string();
        }
        if trim_left {
            text = text.trim_end().to_string();
        }
        out.push(Tok::Text(text));
        let body_start = if trim_left { 1 } else { 0 };
        let end = after
            .find("}}")
            .ok_or_else(|| "unclosed action".to_string())?;
        let mut body = &after[body_start..end];
        trim_next = false;
        if body.ends_with(" -") || body.ends_with("\n-") {
            body = &body[..body.len() - 1];
            trim_next = true;
        }
        out.push(Tok::Action(body.trim().to_string()));
        rest = &after[end + 2..];
    }
    let mut text = rest.to_string();
    if trim_next {
        text = text.trim_start().to_string();
    }
    out.push(Tok::Text(text));
    Ok(out)
}

fn words(src: &str) -> Result<Vec<String>, Error> {
    let mut out = Vec::new();
    let chars: Vec<char> = src.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c == '"' {
            let mut s = String::from('"');
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' && i + 1 < chars.len() {
                    s.push(chars[i]);
                    i += 1;
                }
                s.push(chars[i]);
                i += 1;
            }
            if i >= chars.len() {
                return Err(format!("unterminated string in {src:?}"));
            }
            s.push('"');
            i += 1;
            out.push(s);
        } else if c == '`' {
            let end = chars[i + 1..]
                .iter()
                .position(|&c| c == '`')
                .ok_or_else(|| format!("unterminated raw string in {src:?}"))?;
            let raw: String = chars[i + 1..i + 1 + end].iter().collect();
            out.push(format!(
                "\"{}\"",
                raw.replace('\\', "\\\\").replace('"', "\\\"")
            ));
            i += end + 2;
        } else if "()|".contains(c) {
            out.push(c.to_string());
            i += 1;
        } else if c == ':' && chars.get(i + 1) == Some(&'=') {
            out.push(":=".into());
            i += 2;
        } else if c == '=' {
            out.push("=".into());
            i += 1;
        } else if c == ',' {
            out.push(",".into());
            i += 1;
        } else {
            let mut s = String::new();
            while i < chars.len() && !chars[i].is_whitespace() && !"()|,\"=".contains(chars[i]) {
                if chars[i] == ':' && chars.get(i + 1) == Some(&'=') {
                    break;
                }
                s.push(chars[i]);
                i += 1;
            }
            out.push(s);
        }
    }
    Ok(out)
}

fn unquote(s: &str) -> String {
    let inner = &s[1..s.len() - 1];
    let mut out = String::new();
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some(o) => out.push(o),
                None => {}
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn path_of(s: &str) -> Vec<String> {
    s.split('.')
        .filter(|p| !p.is_empty())
        .map(String::from)
        .collect()
}

fn parse_pipeline(ws: &[String]) -> Result<Pipeline, Error> {
    let mut ws = ws;
    let mut assign = None;
    if ws.len() >= 2 && ws[0].starts_with('$') && (ws[1] == ":=" || ws[1] == "=") {
        assign = Some((ws[0].clone(), ws[1] == ":="));
        ws = &ws[2..];
    }
    let mut cmds = Vec::new();
    let mut cmd = Vec::new();
    let mut i = 0;
    while i < ws.len() {
        let w = &ws[i];
        match w.as_str() {
            "|" => {
                if cmd.is_empty() {
                    return Err("empty command in pipeline".into());
                }
                cmds.push(std::mem::take(&mut cmd));
            }
            "(" => {
                let mut depth = 1;
                let mut j = i + 1;
                while j < ws.len() {
                    match ws[j].as_str() {
                        "(" => depth += 1,
                        ")" => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        _ => {}
                    }
                    j += 1;
                }
                if j >= ws.len() {
                    return Err("unbalanced parentheses".into());
                }
                cmd.push(Arg::Sub(parse_pipeline(&ws[i + 1..j])?));
                i = j;
            }
            ")" => return Err("unbalanced parentheses".into()),
            _ => cmd.push(parse_arg(w)?),
        }
        i += 1;
    }
    if !cmd.is_empty() {
        cmds.push(cmd);
    }
    if cmds.is_empty() {
        return Err("empty pipeline".into());
    }
    Ok(Pipeline { assign, cmds })
}

fn parse_arg(w: &str) -> Result<Arg, Error> {
    Ok(if w.starts_with('"') {
        Arg::Str(unquote(w))
    } else if w == "true" || w == "false" {
        Arg::Bool(w == "true")
    } else if w == "nil" {
        Arg::Nil
    } else if let Ok(n) = w.parse::<i64>() {
        Arg::Num(n)
    } else if w.starts_with('.') {
        Arg::Dot(path_of(w))
    } else if let Some(rest) = w.strip_prefix('$') {
        let (name, path) = match rest.find('.') {
            Some(i) => (&rest[..i], path_of(&rest[i..])),
            None => (rest, Vec::new()),
        };
        Arg::Var(format!("${name}"), path)
    } else if w.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        Arg::Ident(w.to_string())
    } else {
        return Err(format!("unsupported token {w:?}"));
    })
}

/// Parsed templates: the main nodes and `define`d templates.
struct Parsed {
    nodes: Vec<Node>,
    defines: BTreeMap<String, Vec<Node>>,
}

fn parse(src: &str) -> Result<Parsed, Error> {
    let toks = lex(src)?;
    let mut pos = 0;
    let mut defines = BTreeMap::new();
    let (nodes, stop) = parse_list(&toks, &mut pos, &mut defines)?;
    if let Some(stop) = stop {
        return Err(format!("unexpected {{{{ {stop} }}}}"));
    }
    Ok(Parsed { nodes, defines })
}

/// Parses until `end`/`else` (returned) or the end of input.
/// The body of a `range` or `with` block and its `else` branch (empty without one).
fn parse_body_and_else(
    toks: &[Tok],
    pos: &mut usize,
    defines: &mut BTreeMap<String, Vec<Node>>,
    action: &str,
) -> Result<(Vec<Node>, Vec<Node>), Error> {
    let (body, stop) = parse_list(toks, pos, defines)?;
    match stop.as_deref() {
        Some("end") => Ok((body, Vec::new())),
        Some("else") => {
            let (otherwise, stop) = parse_list(toks, pos, defines)?;
            if stop.as_deref() != Some("end") {
                return Err(format!("{action} else without end"));
            }
            Ok((body, otherwise))
        }
        other => Err(format!("{action} ended by {other:?}")),
    }
}

fn parse_list(
    toks: &[Tok],
    pos: &mut usize,
    defines: &mut BTreeMap<String, Vec<Node>>,
) -> Result<(Vec<Node>, Option<String>), Error> {
    let mut nodes = Vec::new();
    while *pos < toks.len() {
        let tok = toks[*pos].clone();
        *pos += 1;
        let body = match tok {
            Tok::Text(t) => {
                if !t.is_empty() {
                    nodes.push(Node::Text(t));
                }
                continue;
            }
            Tok::Action(a) => a,
        };
        if body.starts_with("/*") {
            if !body.ends_with("*/") {
                return Err(format!("bad comment {body:?}"));
            }
            continue;
        }
        let ws = words(&body)?;
        let Some(first) = ws.first() else {
            return Err("empty action".into());
        };
        match first.as_str() {
            "end" => return Ok((nodes, Some("end".into()))),
            "else" => return Ok((nodes, Some(body.clone()))),
            "if" => {
                let mut branches = vec![(parse_pipeline(&ws[1..])?, Vec::new())];
                let mut otherwise = Vec::new();
                loop {
                    let (list, stop) = parse_list(toks, pos, defines)?;
                    let stop = stop.ok_or("if without end")?;
                    let target = if branches.last().is_some_and(|b| b.1.is_empty()) {
                        &mut branches.last_mut().expect("one branch").1
                    } else {
                        &mut otherwise
                    };
                    *target = list;
                    if stop == "end" {
                        break;
                    }
                    let sw = words(&stop)?;
                    if sw.len() > 1 && sw[1] == "if" {
                        branches.push((parse_pipeline(&sw[2..])?, Vec::new()));
                    } else if sw.len() == 1 {
                        let (list, stop) = parse_list(toks, pos, defines)?;
                        if stop.as_deref() != Some("end") {
                            return Err("else without end".into());
                        }
                        otherwise = list;
                        break;
                    } else {
                        return Err(format!("unsupported {stop:?}"));
                    }
                }
                nodes.push(Node::If(branches, otherwise));
            }
            "range" => {
                let mut rest = &ws[1..];
                let mut vars = Vec::new();
                if let Some(i) = rest.iter().position(|w| w == ":=") {
                    vars = rest[..i].iter().filter(|w| *w != ",").cloned().collect();
                    rest = &rest[i + 1..];
                }
                let pipe = parse_pipeline(rest)?;
                let (body, otherwise) = parse_body_and_else(toks, pos, defines, "range")?;
                nodes.push(Node::Range {
                    vars,
                    pipe,
                    body,
                    otherwise,
                });
            }
            "with" => {
                let pipe = parse_pipeline(&ws[1..])?;
                let (body, otherwise) = parse_body_and_else(toks, pos, defines, "with")?;
                nodes.push(Node::With(pipe, body, otherwise));
            }
            "define" => {
                let name = ws
                    .get(1)
                    .filter(|n| n.starts_with('"'))
                    .ok_or("define needs a name")?;
                let (body, stop) = parse_list(toks, pos, defines)?;
                if stop.as_deref() != Some("end") {
                    return Err("define without end".into());
                }
                defines.insert(unquote(name), body);
            }
            "template" | "block" | "break" | "continue" => {
                return Err(format!("unsupported keyword {first:?}"));
            }
            _ => nodes.push(Node::Action(parse_pipeline(&ws)?)),
        }
    }
    Ok((nodes, None))
}

// ---------- evaluation ----------

struct Ctx<'a> {
    defines: &'a BTreeMap<String, Vec<Node>>,
    vars: Vec<(String, Value)>,
}

fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64() != Some(0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

fn field(v: &Value, path: &[String], what: &str) -> Result<Value, Error> {
    let mut cur = v.clone();
    for (i, p) in path.iter().enumerate() {
        cur = match &cur {
            Value::Object(m) => match m.get(p) {
                Some(x) => x.clone(),
                None => {
                    return Err(format!(
                        "{what}.{}: no such key (strict mode)",
                        path[..=i].join(".")
                    ));
                }
            },
            Value::Null => {
                return Err(format!(
                    "{what}.{}: nil pointer evaluating",
                    path[..=i].join(".")
                ));
            }
            other => return Err(format!("can't evaluate field {p} in {other}")),
        };
    }
    Ok(cur)
}

/// How Go's text/template prints a value.
fn print(v: &Value) -> Result<String, Error> {
    Ok(match v {
        Value::Null => String::new(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => s.clone(),
        other => return Err(format!("printing a map or list ({other}) is not supported")),
    })
}

fn to_yaml(v: &Value) -> Result<String, Error> {
    if v.is_null() {
        return Ok("null".into());
    }
    let s = serde_yaml_ng::to_string(v).map_err(|e| e.to_string())?;
    Ok(s.trim_end_matches('\n').to_string())
}

fn indent(n: usize, s: &str) -> String {
    let pad = " ".repeat(n);
    s.split('\n')
        .map(|l| format!("{pad}{l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn as_int(v: &Value) -> Result<i64, Error> {
    v.as_i64()
        .or_else(|| v.as_f64().map(|f| f as i64))
        .ok_or_else(|| format!("expected a number, got {v}"))
}

fn printf(fmt: &str, args: &[Value]) -> Result<String, Error> {
    let mut out = String::new();
    let mut it = args.iter();
    let mut chars = fmt.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('%') => out.push('%'),
            Some('s' | 'v' | 'd') => {
                let a = it.next().ok_or("printf: missing argument")?;
                out.push_str(&print(a)?);
            }
            other => return Err(format!("printf verb %{other:?} is not supported")),
        }
    }
    Ok(out)
}

impl Ctx<'_> {
    fn var(&self, name: &str) -> Result<Value, Error> {
        self.vars
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
            .ok_or_else(|| format!("undefined variable {name}"))
    }

    fn arg(&mut self, a: &Arg, dot: &Value) -> Result<Value, Error> {
        Ok(match a {
            Arg::Str(s) => json!(s),
            Arg::Num(n) => json!(n),
            Arg::Bool(b) => json!(b),
            Arg::Nil => Value::Null,
            Arg::Dot(p) => field(dot, p, "")?,
            Arg::Var(name, p) => field(&self.var(name)?, p, name)?,
            Arg::Sub(pipe) => self.pipeline(pipe, dot)?,
            Arg::Ident(name) => self.call(name, &[], None, dot)?,
        })
    }

    fn pipeline(&mut self, p: &Pipeline, dot: &Value) -> Result<Value, Error> {
        let mut prev: Option<Value> = None;
        for cmd in &p.cmds {
            let v = match &cmd[0] {
                Arg::Ident(name) => {
                    let mut args = Vec::new();
                    for a in &cmd[1..] {
                        args.push(self.arg(a, dot)?);
                    }
                    self.call(name, &args, prev.take(), dot)?
                }
                other => {
                    if cmd.len() > 1 || prev.is_some() {
                        return Err(format!("{other:?} is not a function"));
                    }
                    self.arg(other, dot)?
                }
            };
            prev = Some(v);
        }
        let v = prev.expect("non-empty pipeline");
        if let Some((name, declare)) = &p.assign {
            if *declare {
                self.vars.push((name.clone(), v));
            } else {
                let slot = self
                    .vars
                    .iter_mut()
                    .rev()
                    .find(|(n, _)| n == name)
                    .ok_or_else(|| format!("assignment to undeclared {name}"))?;
                slot.1 = v;
            }
            return Ok(Value::String(String::new()));
        }
        Ok(v)
    }

    fn call(
        &mut self,
        name: &str,
        args: &[Value],
        piped: Option<Value>,
        _dot: &Value,
    ) -> Result<Value, Error> {
        let mut a: Vec<Value> = args.to_vec();
        if let Some(p) = piped {
            a.push(p);
        }
        let n = a.len();
        let need = |k: usize| -> Result<(), Error> {
            if n == k {
                Ok(())
            } else {
                Err(format!("{name}: wants {k} arguments, got {n}"))
            }
        };
        let s = |v: &Value| print(v);
        Ok(match name {
            "default" => {
                need(2)?;
                if truthy(&a[1]) {
                    a[1].clone()
                } else {
                    a[0].clone()
                }
            }
            "quote" => {
                need(1)?;
                json!(format!("{:?}", s(&a[0])?))
            }
            "toYaml" => {
                need(1)?;
                json!(to_yaml(&a[0])?)
            }
            "toString" => {
                need(1)?;
                json!(s(&a[0])?)
            }
            "nindent" => {
                need(2)?;
                json!(format!("\n{}", indent(as_int(&a[0])? as usize, &s(&a[1])?)))
            }
            "indent" => {
                need(2)?;
                json!(indent(as_int(&a[0])? as usize, &s(&a[1])?))
            }
            "eq" => {
                if n < 2 {
                    return Err("eq: wants 2 or more arguments".into());
                }
                json!(a[1..].iter().any(|x| x == &a[0]))
            }
            "ne" => {
                need(2)?;
                json!(a[0] != a[1])
            }
            "not" => {
                need(1)?;
                json!(!truthy(&a[0]))
            }
            "and" => a
                .iter()
                .find(|v| !truthy(v))
                .or(a.last())
                .cloned()
                .ok_or("and: no arguments")?,
            "or" => a
                .iter()
                .find(|v| truthy(v))
                .or(a.last())
                .cloned()
                .ok_or("or: no arguments")?,
            "empty" => {
                need(1)?;
                json!(!truthy(&a[0]))
            }
            "printf" => {
                if n == 0 {
                    return Err("printf: no format".into());
                }
                json!(printf(&s(&a[0])?, &a[1..])?)
            }
            "regexReplaceAll" => {
                need(3)?;
                let re = regex::Regex::new(&s(&a[0])?).map_err(|e| e.to_string())?;
                json!(re.replace_all(&s(&a[1])?, s(&a[2])?.as_str()).to_string())
            }
            "required" => {
                need(2)?;
                if a[1].is_null() || a[1] == json!("") {
                    return Err(format!("required: {}", s(&a[0])?));
                }
                a[1].clone()
            }
            "list" => Value::Array(a),
            "dict" => {
                if !n.is_multiple_of(2) {
                    return Err("dict: wants key/value pairs".into());
                }
                let mut m = Map::new();
                for pair in a.chunks(2) {
                    m.insert(s(&pair[0])?, pair[1].clone());
                }
                Value::Object(m)
            }
            "join" => {
                need(2)?;
                let sep = s(&a[0])?;
                let items = a[1].as_array().ok_or("join: not a list")?;
                let parts: Result<Vec<String>, Error> = items.iter().map(print).collect();
                json!(parts?.join(&sep))
            }
            "trunc" => {
                need(2)?;
                let len = as_int(&a[0])? as usize;
                json!(s(&a[1])?.chars().take(len).collect::<String>())
            }
            "trimSuffix" => {
                need(2)?;
                let suffix = s(&a[0])?;
                let text = s(&a[1])?;
                json!(text.strip_suffix(suffix.as_str()).unwrap_or(&text))
            }
            "ternary" => {
                need(3)?;
                if truthy(&a[2]) {
                    a[0].clone()
                } else {
                    a[1].clone()
                }
            }
            "include" => {
                need(2)?;
                let tname = s(&a[0])?;
                let body = self
                    .defines
                    .get(&tname)
                    .ok_or_else(|| format!("include: no template {tname:?}"))?
                    .clone();
                let mut inner = Ctx {
                    defines: self.defines,
                    vars: vec![("$".into(), a[1].clone())],
                };
                let mut out = String::new();
                inner.nodes(&body, &a[1], &mut out)?;
                json!(out)
            }
            other => {
                return Err(format!(
                    "function {other:?} is not supported by this renderer"
                ));
            }
        })
    }

    fn nodes(&mut self, nodes: &[Node], dot: &Value, out: &mut String) -> Result<(), Error> {
        let depth = self.vars.len();
        for node in nodes {
            match node {
                Node::Text(t) => out.push_str(t),
                Node::Action(p) => {
                    let v = self.pipeline(p, dot)?;
                    if p.assign.is_none() {
                        out.push_str(&print(&v)?);
                    }
                }
                Node::If(branches, otherwise) => {
                    let mut done = false;
                    for (cond, body) in branches {
                        if truthy(&self.pipeline(cond, dot)?) {
                            self.nodes(body, dot, out)?;
                            done = true;
                            break;
                        }
                    }
                    if !done {
                        self.nodes(otherwise, dot, out)?;
                    }
                }
                Node::With(pipe, body, otherwise) => {
                    let v = self.pipeline(pipe, dot)?;
                    if truthy(&v) {
                        self.nodes(body, &v, out)?;
                    } else {
                        self.nodes(otherwise, dot, out)?;
                    }
                }
                Node::Range {
                    vars,
                    pipe,
                    body,
                    otherwise,
                } => {
                    let v = self.pipeline(pipe, dot)?;
                    let items: Vec<(Value, Value)> = match &v {
                        Value::Array(a) => a
                            .iter()
                            .enumerate()
                            .map(|(i, x)| (json!(i), x.clone()))
                            .collect(),
                        Value::Object(m) => m.iter().map(|(k, x)| (json!(k), x.clone())).collect(),
                        Value::Null => Vec::new(),
                        other => return Err(format!("range over {other}")),
                    };
                    if items.is_empty() {
                        self.nodes(otherwise, dot, out)?;
                    }
                    for (k, x) in items {
                        let mark = self.vars.len();
                        match vars.as_slice() {
                            [] => {}
                            [v] => self.vars.push((v.clone(), x.clone())),
                            [i, v] => {
                                self.vars.push((i.clone(), k));
                                self.vars.push((v.clone(), x.clone()));
                            }
                            _ => return Err("range: too many variables".into()),
                        }
                        self.nodes(body, &x, out)?;
                        self.vars.truncate(mark);
                    }
                }
            }
        }
        self.vars.truncate(depth);
        Ok(())
    }
}

/// Deep merge of `over` into `base` (maps merge, everything else replaces).
pub fn merge(base: &mut Value, over: &Value) {
    match (base, over) {
        (Value::Object(b), Value::Object(o)) => {
            for (k, v) in o {
                match b.get_mut(k) {
                    Some(slot) if slot.is_object() && v.is_object() => merge(slot, v),
                    _ => {
                        b.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (b, o) => *b = o.clone(),
    }
}

/// What `helm template` is told besides values.
pub struct Release<'a> {
    pub name: &'a str,
    pub namespace: &'a str,
    /// `.Capabilities.KubeVersion.Version`, e.g. `v1.33.0`.
    pub kube_version: &'a str,
}

fn read_yaml(path: &Path) -> Value {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let yaml: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text)
        .unwrap_or_else(|e| panic!("{}: invalid YAML: {e}", path.display()));
    serde_json::to_value(yaml).expect("JSON-compatible YAML")
}

/// Renders every template of the chart in `dir`: `(file name, output)` pairs.
/// Panics with the file and the reason on anything unsupported.
pub fn render(dir: &Path, release: &Release, overrides: &Value) -> Vec<(String, String)> {
    let chart = read_yaml(&dir.join("Chart.yaml"));
    let mut values = read_yaml(&dir.join("values.yaml"));
    merge(&mut values, overrides);
    let version = release.kube_version.trim_start_matches('v');
    let mut parts = version.split('.');
    let (major, minor) = (
        parts.next().unwrap_or("1").to_string(),
        parts.next().unwrap_or("0").to_string(),
    );
    let root = json!({
        "Values": values,
        "Release": {"Name": release.name, "Namespace": release.namespace,
                    "Service": "Helm", "IsInstall": true, "IsUpgrade": false, "Revision": 1},
        "Chart": {"Name": chart["name"], "Version": chart["version"],
                  "AppVersion": chart["appVersion"]},
        "Capabilities": {"KubeVersion": {"Version": release.kube_version,
                                         "Major": major, "Minor": minor}},
    });
    let mut files: Vec<_> = std::fs::read_dir(dir.join("templates"))
        .expect("templates/")
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    let mut defines = BTreeMap::new();
    let mut parsed = Vec::new();
    for path in &files {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if name == "NOTES.txt" {
            continue;
        }
        let text = std::fs::read_to_string(path).unwrap();
        let p = parse(&text).unwrap_or_else(|e| panic!("templates/{name}: {e}"));
        defines.extend(p.defines);
        if !name.starts_with('_') {
            parsed.push((name, p.nodes));
        }
    }
    let mut out = Vec::new();
    for (name, nodes) in parsed {
        let mut ctx = Ctx {
            defines: &defines,
            vars: vec![("$".into(), root.clone())],
        };
        let mut text = String::new();
        ctx.nodes(&nodes, &root, &mut text)
            .unwrap_or_else(|e| panic!("templates/{name}: {e}"));
        out.push((name, text));
    }
    out
}

/// An empty object for [`render`]'s overrides.
pub fn no_overrides() -> Value {
    Value::Object(Map::new())
}

/// Self-checks of the renderer on small templates (called from a test).
pub fn self_check() {
    let root = json!({"Values": {"a": "x", "n": 3, "l": ["p", "q"], "m": {"k": "v"}, "f": false,
        "e": ""}});
    let run = |src: &str| -> Result<String, Error> {
        let p = parse(src)?;
        let mut ctx = Ctx {
            defines: &p.defines,
            vars: vec![("$".into(), root.clone())],
        };
        let mut out = String::new();
        ctx.nodes(&p.nodes, &root, &mut out)?;
        Ok(out)
    };
    let cases = [
        ("a {{ .Values.a }} b", "a x b"),
        ("a\n  {{- .Values.a }}\nb", "ax\nb"),
        ("{{ .Values.a -}}\n  b", "xb"),
        (
            "{{ if .Values.f }}y{{ else if .Values.n }}n{{ else }}z{{ end }}",
            "n",
        ),
        ("{{ if not .Values.f }}y{{ end }}", "y"),
        ("{{ range .Values.l }}[{{ . }}]{{ end }}", "[p][q]"),
        (
            "{{ range $i, $v := .Values.l }}{{ $i }}={{ $v }};{{ end }}",
            "0=p;1=q;",
        ),
        (
            "{{ range $k, $v := .Values.m }}{{ $k }}:{{ $v }}{{ end }}",
            "k:v",
        ),
        ("{{ .Values.e | default \"d\" }}", "d"),
        ("{{ .Values.a | quote }}", "\"x\""),
        ("{{ toYaml .Values.m | nindent 2 }}", "\n  k: v"),
        ("{{ printf \"%s-%d\" .Values.a .Values.n }}", "x-3"),
        ("{{ eq .Values.a \"x\" }}", "true"),
        ("{{ and .Values.a .Values.f }}", "false"),
        (
            "{{ regexReplaceAll \"[-+].*$\" \"v1.31.1+k3s1\" \"\" }}",
            "v1.31.1",
        ),
        (
            "{{ $x := .Values.a }}{{ $x }}{{ with .Values.m }}{{ .k }}{{ $.Values.n }}{{ end }}",
            "xv3",
        ),
        (
            "{{ define \"t\" }}<{{ .k }}>{{ end }}{{ include \"t\" .Values.m }}",
            "<v>",
        ),
        ("{{/* c */}}{{- /* c2 */ -}}\nq", "q"),
        ("{{ join \",\" .Values.l }}", "p,q"),
        ("{{ ternary \"a\" \"b\" .Values.f }}", "b"),
        (
            "{{ define \"d\" }}{{ .x }}{{ .r.Values.a }}{{ end }}{{ include \"d\" (dict \"x\" 1 \"r\" $) }}",
            "1x",
        ),
    ];
    for (src, want) in cases {
        assert_eq!(run(src).as_deref(), Ok(want), "{src}");
    }
    for bad in [
        "{{ .Values.missing }}",
        "{{ sha256sum .Values.a }}",
        "{{ template \"x\" . }}",
        "{{ .Values.m }}",
        "{{ if .Values.a }}",
        "{{ .Values.a.b }}",
    ] {
        assert!(run(bad).is_err(), "{bad} should fail");
    }
}
