//! The reader of the IR text form that [`crate::print`] writes:
//! `parse_program(&program_to_string(p))` gives back `p`.
//!
//! The form is line-based: a `symbols:` line, `static` lines, then functions,
//! each a `fn` header, a `vars:` line, an optional `sig:` line and its blocks
//! (a `bN:` label, then indented operations and one terminator). Blank lines
//! and lines whose first non-blank characters are `//` are skipped, so that
//! hand-written files may carry comments.
//!
//! Entities must be numbered in order (`f0`, `f1`, ...; the `vars:` list is
//! `v0`, `v1`, ...). The reader checks what it needs to build a [`Program`]
//! (that names, numbers and referenced variables, blocks, callees, statics
//! and symbols exist); everything else is the verifier's job. Any input gives
//! a program or a [`ParseError`] with a line and a column, never a panic.

use std::fmt;

use crate::{
    AdjointKind, Block, BlockData, EntityRef, EntityVec, FuncId, Function, Instances, JoinCall, Op,
    Param, Prim, Program, StaticAdjoint, StaticDecl, StaticId, TapeMode, Terminator, Var, VarData,
};
use autobatch_types::{Dim, Loc, Scalar, ScalarType, SymbolId, TensorType, Type};

/// Why a text is not a program: where (1-based line and column, in
/// characters) and what.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    pub line: usize,
    pub column: usize,
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.line, self.column, self.message)
    }
}

impl std::error::Error for ParseError {}

type Parsed<T> = Result<T, ParseError>;

/// Deepest nesting of array or tuple types the reader accepts (it recurses).
const MAX_TYPE_DEPTH: usize = 64;

/// Reads a whole program.
pub fn parse_program(text: &str) -> Parsed<Program> {
    let lines: Vec<Cursor> = text
        .lines()
        .enumerate()
        .map(|(i, text)| Cursor::new(i + 1, text))
        .filter(|c| !is_blank_or_comment(c.text))
        .collect();
    let mut reader = Reader {
        lines,
        next: 0,
        program: Program::default(),
        callees: Vec::new(),
    };
    reader.header()?;
    while let Some(line) = reader.take_line() {
        reader.function(line)?;
    }
    reader.check_callees()?;
    Ok(reader.program)
}

fn is_blank_or_comment(line: &str) -> bool {
    let line = line.trim_start();
    line.is_empty() || line.starts_with("//")
}

/// A position inside one line, and the part of the line not yet read.
#[derive(Clone, Copy, Debug)]
struct Cursor<'a> {
    line: usize,
    text: &'a str,
    pos: usize,
}

/// Characters that end a name.
const NAME_END: &[char] = &[' ', ',', '(', ')', ':', '=', '[', ']', ';'];

impl<'a> Cursor<'a> {
    fn new(line: usize, text: &'a str) -> Self {
        Cursor { line, text, pos: 0 }
    }

    fn error(&self, message: impl Into<String>) -> ParseError {
        ParseError {
            line: self.line,
            column: self.text[..self.pos].chars().count() + 1,
            message: message.into(),
        }
    }

    fn rest(&self) -> &'a str {
        &self.text[self.pos..]
    }

    fn at_end(&self) -> bool {
        self.rest().is_empty()
    }

    fn peek(&self) -> Option<char> {
        self.rest().chars().next()
    }

    fn eat(&mut self, token: &str) -> bool {
        if self.rest().starts_with(token) {
            self.pos += token.len();
            true
        } else {
            false
        }
    }

    fn expect(&mut self, token: &str) -> Parsed<()> {
        if self.eat(token) {
            Ok(())
        } else {
            Err(self.error(format!("expected `{token}`")))
        }
    }

    fn skip_spaces(&mut self) {
        let rest = self.rest();
        self.pos += rest.len() - rest.trim_start_matches(' ').len();
    }

    fn expect_end(&self) -> Parsed<()> {
        if self.rest().trim_end().is_empty() {
            Ok(())
        } else {
            Err(self.error("unexpected text at the end of the line"))
        }
    }

    /// Everything up to (not including) the first character in `end`.
    fn take_until(&mut self, end: &[char]) -> &'a str {
        let rest = self.rest();
        let len = rest.find(end).unwrap_or(rest.len());
        self.pos += len;
        &rest[..len]
    }

    fn name(&mut self, what: &str) -> Parsed<&'a str> {
        let start = *self;
        let name = self.take_until(NAME_END);
        if name.is_empty() {
            return Err(start.error(format!("expected {what}")));
        }
        Ok(name)
    }

    fn number<T: std::str::FromStr>(&mut self, what: &str) -> Parsed<T> {
        let start = *self;
        let rest = self.rest();
        let len = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        self.pos += len;
        rest[..len]
            .parse()
            .map_err(|_| start.error(format!("expected {what}")))
    }

    /// An entity written `prefix` then its number (`v7`).
    fn entity(&mut self, prefix: &str) -> Parsed<u32> {
        let start = *self;
        if !self.eat(prefix) {
            return Err(self.error(format!("expected `{prefix}` and a number")));
        }
        self.number("a number")
            .map_err(|_| start.error(format!("expected `{prefix}` and a number")))
    }

    /// Removes a trailing `  @line:col` from the line and returns it.
    fn take_loc(&mut self) -> Parsed<Loc> {
        let Some(at) = self.text.rfind("  @").filter(|at| *at >= self.pos) else {
            return Err(Cursor {
                pos: self.text.len(),
                ..*self
            }
            .error("expected a location `  @line:column`"));
        };
        let mut loc = Cursor {
            pos: at + 3,
            ..*self
        };
        let line = loc.number("a line number")?;
        loc.expect(":")?;
        let column = loc.number("a column number")?;
        loc.expect_end()?;
        self.text = &self.text[..at];
        Ok(Loc::new(line, column))
    }
}

/// A call names its callee by number and by name; both must agree, which
/// is checked once every function is read.
struct CalleeRef<'a> {
    at: Cursor<'a>,
    callee: FuncId,
    name: &'a str,
}

struct Reader<'a> {
    lines: Vec<Cursor<'a>>,
    next: usize,
    program: Program,
    callees: Vec<CalleeRef<'a>>,
}

impl<'a> Reader<'a> {
    fn take_line(&mut self) -> Option<Cursor<'a>> {
        let line = self.lines.get(self.next).copied()?;
        self.next += 1;
        Some(line)
    }

    fn peek_line(&self) -> Option<Cursor<'a>> {
        self.lines.get(self.next).copied()
    }

    /// The next line, which must exist because `what` is expected.
    fn expect_line(&mut self, after: Cursor<'a>, what: &str) -> Parsed<Cursor<'a>> {
        self.take_line().ok_or_else(|| {
            Cursor {
                pos: after.text.len(),
                ..after
            }
            .error(format!("the text ends where {what} is expected"))
        })
    }

    /// The `symbols:` line and the `static` lines, if any.
    fn header(&mut self) -> Parsed<()> {
        if let Some(mut line) = self.peek_line() {
            if line.eat("symbols:") {
                self.next += 1;
                self.symbols(line)?;
            }
        }
        while let Some(mut line) = self.peek_line() {
            if !line.eat("static ") {
                break;
            }
            self.next += 1;
            let decl = self.static_decl(line)?;
            self.program.statics.push(decl);
        }
        Ok(())
    }

    /// ` sym0=N sym1=D`
    fn symbols(&mut self, mut line: Cursor<'a>) -> Parsed<()> {
        while !line.rest().trim_end().is_empty() {
            line.expect(" ")?;
            let id = line.entity("sym")?;
            if id as usize != self.program.symbols.len() {
                return Err(line.error(format!(
                    "expected sym{} (symbols are numbered in order)",
                    self.program.symbols.len()
                )));
            }
            line.expect("=")?;
            let name = line.name("a symbol name")?;
            self.program.symbols.push(name.to_string());
        }
        Ok(())
    }

    /// `s0 X: [[f64; D]; N]  @3:5` (after `static `).
    fn static_decl(&self, mut line: Cursor<'a>) -> Parsed<StaticDecl> {
        let loc = line.take_loc()?;
        let id = line.entity("s")?;
        if id as usize != self.program.statics.len() {
            return Err(line.error(format!(
                "expected s{} (statics are numbered in order)",
                self.program.statics.len()
            )));
        }
        line.expect(" ")?;
        let name = line.name("a static name")?.to_string();
        line.expect(": ")?;
        let ty = self.tensor_type(&mut line, 0)?;
        line.expect_end()?;
        Ok(StaticDecl { name, ty, loc })
    }

    /// A tensor type: `f64`, `[f64; 3]`, `[[f64; D]; N]`.
    fn tensor_type(&self, line: &mut Cursor<'a>, depth: usize) -> Parsed<TensorType> {
        if depth > MAX_TYPE_DEPTH {
            return Err(line.error("types nest too deeply"));
        }
        if line.eat("[") {
            let inner = self.tensor_type(line, depth + 1)?;
            line.expect("; ")?;
            let dim = self.dim(line)?;
            line.expect("]")?;
            let mut dims = vec![dim];
            dims.extend(inner.dims);
            return Ok(TensorType {
                elem: inner.elem,
                dims,
            });
        }
        let start = *line;
        let name = line.name("a type")?;
        let elem = ScalarType::from_name(name)
            .ok_or_else(|| start.error(format!("unknown scalar type `{name}`")))?;
        Ok(TensorType::scalar(elem))
    }

    /// A structured type: a tensor type or a tuple `()`, `(T,)`, `(T, U)`.
    fn structured_type(&self, line: &mut Cursor<'a>, depth: usize) -> Parsed<Type> {
        if depth > MAX_TYPE_DEPTH {
            return Err(line.error("types nest too deeply"));
        }
        if !line.eat("(") {
            return self.tensor_type(line, depth).map(Type::Tensor);
        }
        let mut items = Vec::new();
        while !line.eat(")") {
            items.push(self.structured_type(line, depth + 1)?);
            if items.len() == 1 && line.eat(",)") {
                break;
            }
            if line.peek() != Some(')') {
                line.expect(", ")?;
            }
        }
        Ok(Type::Tuple(items))
    }

    /// A length: a number, a symbol's name, or `symN`.
    fn dim(&self, line: &mut Cursor<'a>) -> Parsed<Dim> {
        if line.peek().is_some_and(|c| c.is_ascii_digit()) {
            return line.number("a length").map(Dim::Fixed);
        }
        let start = *line;
        let name = line.name("a length")?;
        if let Some(i) = self.program.symbols.iter().position(|s| s == name) {
            return Ok(Dim::Symbolic(SymbolId(i as u32)));
        }
        self.symbol_by_number(start)
            .map(Dim::Symbolic)
            .map_err(|_| start.error(format!("unknown symbol `{name}`")))
    }

    /// `symN`, by number.
    fn symbol_by_number(&self, mut line: Cursor<'a>) -> Parsed<SymbolId> {
        let start = line;
        let id = line.entity("sym")?;
        if id as usize >= self.program.symbols.len() {
            return Err(start.error(format!("no symbol sym{id}")));
        }
        Ok(SymbolId(id))
    }

    /// One function: its header line (already taken), `vars:`, `sig:` and blocks.
    fn function(&mut self, header_line: Cursor<'a>) -> Parsed<()> {
        let header = self.function_header(header_line)?;
        let vars_line = self.expect_line(header_line, "a `vars:` line")?;
        let vars: EntityVec<Var, VarData> = self.vars(vars_line)?.into_iter().collect();
        let params = check_params(header_line, &header.params, &vars)?;
        let mut function = Function {
            name: header.name.to_string(),
            signature: Vec::new(),
            ret_type: Type::unit(),
            params,
            results: header.results,
            vars,
            blocks: Default::default(),
            loc: header.loc,
            uncounted: header.uncounted,
        };
        function.signature = function.flat_signature();
        function.ret_type = function.flat_ret_type();
        if let Some(mut line) = self.peek_line() {
            if line.eat("  sig: ") {
                self.next += 1;
                self.signature(line, &mut function)?;
            }
        }
        let id = self.program.functions.push(function);
        self.blocks(id)
    }

    /// `fn f0 name(v0 n: i64) -> (i64)  @1:1`
    fn function_header(&self, mut line: Cursor<'a>) -> Parsed<FunctionHeader<'a>> {
        let loc = line.take_loc()?;
        line.expect("fn ")?;
        let id = line.entity("f")?;
        if id as usize != self.program.functions.len() {
            return Err(line.error(format!(
                "expected f{} (functions are numbered in order)",
                self.program.functions.len()
            )));
        }
        line.expect(" ")?;
        let start = line;
        let name = line.take_until(&['(']);
        if name.is_empty() {
            return Err(start.error("expected a function name"));
        }
        line.expect("(")?;
        let mut params = Vec::new();
        while !line.eat(")") {
            if !params.is_empty() {
                line.expect(", ")?;
            }
            params.push(self.declared_var(&mut line)?);
        }
        line.expect(" -> (")?;
        let mut results = Vec::new();
        while !line.eat(")") {
            if !results.is_empty() {
                line.expect(", ")?;
            }
            results.push(self.tensor_type(&mut line, 0)?);
        }
        let uncounted = line.eat(" uncounted");
        line.expect_end()?;
        Ok(FunctionHeader {
            name,
            params,
            results,
            loc,
            uncounted,
        })
    }

    /// `v0 n: i64` or `v1: i64`.
    fn declared_var(&self, line: &mut Cursor<'a>) -> Parsed<DeclaredVar<'a>> {
        let var = Var(line.entity("v")?);
        let name = if line.eat(" ") {
            Some(line.name("a variable name")?)
        } else {
            None
        };
        line.expect(": ")?;
        let ty = self.tensor_type(line, 0)?;
        Ok(DeclaredVar { var, name, ty })
    }

    /// `  vars: v0 n: i64, v1: i64`
    fn vars(&self, mut line: Cursor<'a>) -> Parsed<Vec<VarData>> {
        line.expect("  vars:")?;
        let mut vars = Vec::new();
        if line.rest().trim_end().is_empty() {
            return Ok(vars);
        }
        line.expect(" ")?;
        loop {
            let start = line;
            let declared = self.declared_var(&mut line)?;
            if declared.var.0 as usize != vars.len() {
                return Err(start.error(format!(
                    "expected v{} (variables are numbered in order)",
                    vars.len()
                )));
            }
            vars.push(VarData {
                ty: declared.ty,
                name: declared.name.map(str::to_string),
            });
            if !line.eat(", ") {
                break;
            }
        }
        line.expect_end()?;
        Ok(vars)
    }

    /// `(p: (f64, f64), n: i64) -> (f64, f64)` (after `  sig: `).
    fn signature(&self, mut line: Cursor<'a>, function: &mut Function) -> Parsed<()> {
        line.expect("(")?;
        let mut signature = Vec::new();
        while !line.eat(")") {
            if !signature.is_empty() {
                line.expect(", ")?;
            }
            let name = line.name("a parameter name")?.to_string();
            line.expect(": ")?;
            let ty = self.structured_type(&mut line, 0)?;
            signature.push(Param { name, ty });
        }
        line.expect(" -> ")?;
        function.ret_type = self.structured_type(&mut line, 0)?;
        line.expect_end()?;
        function.signature = signature;
        Ok(())
    }

    /// The blocks of function `id`, up to the next `fn` line or the end.
    fn blocks(&mut self, id: FuncId) -> Parsed<()> {
        let mut targets = Vec::new();
        while let Some(line) = self.peek_line() {
            if line.text.starts_with("fn ") {
                break;
            }
            self.next += 1;
            let block = self.block(id, line, &mut targets)?;
            self.program.functions[id].blocks.push(block);
        }
        let blocks = self.program.functions[id].blocks.len();
        match targets.into_iter().find(|t| t.block.index() >= blocks) {
            Some(t) => Err(t.at.error(format!("no block {}", t.block))),
            None => Ok(()),
        }
    }

    /// One block: its label line (already taken), operations, terminator.
    fn block(
        &mut self,
        id: FuncId,
        mut label: Cursor<'a>,
        targets: &mut Vec<BlockRef<'a>>,
    ) -> Parsed<BlockData> {
        let loc = label.take_loc()?;
        let number = label.entity("b")?;
        let expected = self.program.functions[id].blocks.len();
        if number as usize != expected {
            return Err(label.error(format!(
                "expected b{expected} (blocks are numbered in order)"
            )));
        }
        label.expect(":")?;
        let uncounted = label.eat(" uncounted");
        let check_arm = label.eat(" check_arm");
        label.expect_end()?;
        let mut ops = Vec::new();
        loop {
            let mut line = self.expect_line(label, "an operation or a terminator")?;
            if !line.eat("  ") {
                return Err(line.error("expected an indented operation or terminator"));
            }
            if let Some(term) = self.terminator(id, line, targets)? {
                return Ok(BlockData {
                    ops,
                    term,
                    loc,
                    uncounted,
                    check_arm,
                });
            }
            ops.push(self.op(id, line)?);
        }
    }

    /// `jump b1`, `branch v2, b1, b2`, `return v1, v2`; `None` for an operation.
    fn terminator(
        &self,
        id: FuncId,
        mut line: Cursor<'a>,
        targets: &mut Vec<BlockRef<'a>>,
    ) -> Parsed<Option<Terminator>> {
        let mut target = |line: &mut Cursor<'a>| -> Parsed<Block> {
            let at = *line;
            let block = Block(line.entity("b")?);
            targets.push(BlockRef { at, block });
            Ok(block)
        };
        let term = if line.eat("jump ") {
            Terminator::Jump(target(&mut line)?)
        } else if line.eat("branch ") {
            let cond = self.var(id, &mut line)?;
            line.expect(", ")?;
            let then_block = target(&mut line)?;
            line.expect(", ")?;
            let else_block = target(&mut line)?;
            Terminator::Branch {
                cond,
                then_block,
                else_block,
            }
        } else if line.eat("return") {
            line.skip_spaces();
            Terminator::Return(self.var_list(id, &mut line)?)
        } else {
            return Ok(None);
        };
        line.expect_end()?;
        Ok(Some(term))
    }

    /// A variable of function `id`.
    fn var(&self, id: FuncId, line: &mut Cursor<'a>) -> Parsed<Var> {
        let start = *line;
        let var = Var(line.entity("v")?);
        if !self.program.functions[id].vars.contains(var) {
            return Err(start.error(format!("no variable {var} in the `vars:` line")));
        }
        Ok(var)
    }

    /// `v1, v2, v3`, possibly empty (up to the end of the line or a `)`).
    fn var_list(&self, id: FuncId, line: &mut Cursor<'a>) -> Parsed<Vec<Var>> {
        let mut vars = Vec::new();
        if line.at_end() || line.peek() == Some(')') {
            return Ok(vars);
        }
        loop {
            vars.push(self.var(id, line)?);
            if !line.eat(", ") {
                return Ok(vars);
            }
        }
    }

    /// An operation: `v1 = add v0, v0  @2:3`, `v1 = call f0 f(v0)  @2:3`, ...
    fn op(&mut self, id: FuncId, mut line: Cursor<'a>) -> Parsed<Op> {
        let loc = line.take_loc()?;
        let dsts = self.destinations(id, &mut line)?;
        let call_start = line;
        let catch = line.eat("catch call ");
        if catch || line.eat("call ") {
            return self.call(id, line, Destinations { dsts, catch, loc });
        }
        let tape = if line.eat("save again ") {
            TapeMode::SaveAgain
        } else if line.eat("save ") {
            TapeMode::Save
        } else if line.eat("again ") {
            TapeMode::Again
        } else if line.eat("restore ") {
            TapeMode::Restore
        } else {
            TapeMode::None
        };
        let fork = ForkHead { dsts, loc, tape };
        if line.eat("join ") {
            return self.join(id, line, fork);
        }
        if line.eat("map.") {
            return self.map(id, line, fork);
        }
        if tape != TapeMode::None {
            return Err(line.error("expected `join` or `map` after a fork's tape mode"));
        }
        let ForkHead { dsts, .. } = fork;
        let dst = match &dsts[..] {
            [] => None,
            [one] => Some(*one),
            _ => return Err(call_start.error("a primitive has at most one result")),
        };
        let prim = self.prim(&mut line)?;
        let args = if line.eat(" ") {
            self.var_list(id, &mut line)?
        } else {
            Vec::new()
        };
        line.expect_end()?;
        Ok(Op::Prim {
            dst,
            prim,
            args,
            loc,
        })
    }

    /// `v1, v2 = ` at the start of an operation, or nothing.
    fn destinations(&self, id: FuncId, line: &mut Cursor<'a>) -> Parsed<Vec<Var>> {
        let mut probe = *line;
        let starts_with_var = probe.entity("v").is_ok()
            && (probe.rest().starts_with(" = ") || probe.rest().starts_with(", "));
        if !starts_with_var {
            return Ok(Vec::new());
        }
        let dsts = self.var_list(id, line)?;
        line.expect(" = ")?;
        Ok(dsts)
    }

    /// `call f1 name(v0, v1)` after the destinations and `call `.
    fn call(&mut self, id: FuncId, mut line: Cursor<'a>, head: Destinations) -> Parsed<Op> {
        let callee = self.callee(&mut line)?;
        let args = self.var_list(id, &mut line)?;
        line.expect(")")?;
        line.expect_end()?;
        Ok(Op::Call {
            dsts: head.dsts,
            callee,
            args,
            loc: head.loc,
            catch: head.catch,
        })
    }

    /// `f1 name(` of a call or an instance: the callee, checked later
    /// against the program's functions.
    fn callee(&mut self, line: &mut Cursor<'a>) -> Parsed<FuncId> {
        let at = *line;
        let callee = FuncId(line.entity("f")?);
        line.expect(" ")?;
        let name = line.take_until(&['(']);
        line.expect("(")?;
        self.callees.push(CalleeRef { at, callee, name });
        Ok(callee)
    }

    /// `line:column` inside an operation (a `join` call's location).
    fn inline_loc(&self, line: &mut Cursor<'a>) -> Parsed<Loc> {
        let l = line.number("a line number")?;
        line.expect(":")?;
        let c = line.number("a column number")?;
        Ok(Loc::new(l, c))
    }

    /// `join f1 a(v0) @3:9, f2 b(v1, v2) @3:15` after the destinations and `join `.
    fn join(&mut self, id: FuncId, mut line: Cursor<'a>, head: ForkHead) -> Parsed<Op> {
        let (mut calls, mut args) = (Vec::new(), Vec::new());
        loop {
            let callee = self.callee(&mut line)?;
            let taken = self.var_list(id, &mut line)?;
            line.expect(") @")?;
            let call_loc = self.inline_loc(&mut line)?;
            calls.push(JoinCall {
                callee,
                args: taken.len(),
                loc: call_loc,
            });
            args.extend(taken);
            if !line.eat(", ") {
                break;
            }
        }
        line.expect_end()?;
        Ok(Op::Fork {
            dsts: head.dsts,
            args,
            instances: Instances::Join(calls),
            loc: head.loc,
            tape: head.tape,
        })
    }

    /// `map.4 f1 g(index, each v0, v2)` after the destinations and `map.`:
    /// `index` first if present, then the `each` arguments, then the others.
    fn map(&mut self, id: FuncId, mut line: Cursor<'a>, head: ForkHead) -> Parsed<Op> {
        let count = self.payload_length(&mut line)?;
        line.expect(" ")?;
        let callee = self.callee(&mut line)?;
        let index = line.eat("index");
        let (mut args, mut each) = (Vec::new(), 0);
        if !index || line.eat(", ") {
            while line.peek() != Some(')') {
                let at = line;
                if line.eat("each ") {
                    if each != args.len() {
                        return Err(at.error("`each` arguments come before the others"));
                    }
                    each += 1;
                }
                args.push(self.var(id, &mut line)?);
                if !line.eat(", ") {
                    break;
                }
            }
        }
        line.expect(")")?;
        line.expect_end()?;
        Ok(Op::Fork {
            dsts: head.dsts,
            args,
            instances: Instances::Map {
                callee,
                count,
                index,
                each,
            },
            loc: head.loc,
            tape: head.tape,
        })
    }

    /// A primitive as `Prim`'s `Display` writes it.
    fn prim(&self, line: &mut Cursor<'a>) -> Parsed<Prim> {
        let start = *line;
        let name = line.take_until(&[' ', '.']);
        match name {
            "const" => {
                line.expect(" ")?;
                let at = *line;
                let text = line.take_until(&[' ']);
                parse_scalar(text)
                    .map(Prim::Const)
                    .ok_or_else(|| at.error(format!("bad constant `{text}`")))
            }
            "load_static" => self.load_static(line),
            "symbol_value" => {
                line.expect(" ")?;
                let at = *line;
                let symbol = self.symbol_by_number(at)?;
                line.entity("sym")?;
                Ok(Prim::SymbolValue(symbol))
            }
            "cast" => {
                line.expect(".")?;
                let at = *line;
                let name = line.name("a scalar type")?;
                ScalarType::from_name(name)
                    .map(Prim::Cast)
                    .ok_or_else(|| at.error(format!("unknown scalar type `{name}`")))
            }
            "fill" => {
                line.expect(".")?;
                self.payload_length(line).map(Prim::Fill)
            }
            "slice" => {
                line.expect(".")?;
                self.payload_length(line).map(Prim::Slice)
            }
            "assert" => {
                line.expect(" ")?;
                let message = string_literal(line)?;
                Ok(Prim::Assert { message })
            }
            "check" => {
                line.expect(" ")?;
                let message = string_literal(line)?;
                Ok(Prim::Check { message })
            }
            "host" => self.host(line),
            "static_adjoint" => self.static_adjoint(line),
            "tape_pop" => {
                line.expect(" ")?;
                self.tensor_type(line, 0).map(Prim::TapePop)
            }
            _ => Prim::from_plain_name(name)
                .ok_or_else(|| start.error(format!("unknown operation `{name}`"))),
        }
    }

    /// `load_static s0 (X)`: the name, when given, must be the static's.
    fn load_static(&self, line: &mut Cursor<'a>) -> Parsed<Prim> {
        line.expect(" ")?;
        let at = *line;
        let id = StaticId(line.entity("s")?);
        let Some(decl) = self.program.statics.get(id) else {
            return Err(at.error(format!("no static {id}")));
        };
        if line.eat(" (") {
            let name_at = *line;
            let name = line.take_until(&[')']);
            line.expect(")")?;
            if name != decl.name {
                return Err(name_at.error(format!("{id} is `{}`, not `{name}`", decl.name)));
            }
        }
        Ok(Prim::LoadStatic(id))
    }

    /// `static_adjoint.KIND s0 (X)`: a contribution to a static's adjoint.
    fn static_adjoint(&self, line: &mut Cursor<'a>) -> Parsed<Prim> {
        line.expect(".")?;
        let at = *line;
        let kind_name = line.name("a kind of adjoint")?;
        let Some(kind) = AdjointKind::ALL.into_iter().find(|k| k.name() == kind_name) else {
            let kinds: Vec<&str> = AdjointKind::ALL.iter().map(|k| k.name()).collect();
            return Err(at.error(format!(
                "unknown kind of static adjoint `{kind_name}` ({})",
                kinds.join(", ")
            )));
        };
        let Prim::LoadStatic(id) = self.load_static(line)? else {
            unreachable!("load_static parses a static")
        };
        Ok(Prim::StaticAdjoint(StaticAdjoint { id, kind }))
    }

    /// `host NAME(T, ...) -> T`: a host primitive with its declared types.
    fn host(&self, line: &mut Cursor<'a>) -> Parsed<Prim> {
        line.expect(" ")?;
        let name = line.name("a host primitive's name")?.to_owned();
        line.expect("(")?;
        let mut params = Vec::new();
        while !line.eat(")") {
            if !params.is_empty() {
                line.expect(", ")?;
            }
            params.push(self.tensor_type(line, 0)?);
        }
        line.expect(" -> ")?;
        let result = self.tensor_type(line, 0)?;
        Ok(Prim::Host(Box::new(crate::HostPrim {
            name,
            params,
            result,
        })))
    }

    /// The length of `fill.N`, `slice.N` and `map.N`: a number or `symN`.
    fn payload_length(&self, line: &mut Cursor<'a>) -> Parsed<Dim> {
        if line.peek().is_some_and(|c| c.is_ascii_digit()) {
            return line.number("a length").map(Dim::Fixed);
        }
        let symbol = self.symbol_by_number(*line)?;
        line.entity("sym")?;
        Ok(Dim::Symbolic(symbol))
    }

    /// Every call's callee exists and has the name the call gives it.
    fn check_callees(&self) -> Parsed<()> {
        for call in &self.callees {
            let Some(f) = self.program.functions.get(call.callee) else {
                return Err(call.at.error(format!("no function {}", call.callee)));
            };
            if f.name != call.name {
                return Err(call.at.error(format!(
                    "{} is `{}`, not `{}`",
                    call.callee, f.name, call.name
                )));
            }
        }
        Ok(())
    }
}

/// A function header as read, before its blocks.
struct FunctionHeader<'a> {
    name: &'a str,
    params: Vec<DeclaredVar<'a>>,
    results: Vec<TensorType>,
    loc: Loc,
    uncounted: bool,
}

/// A variable with its name and type, as a header or `vars:` line declares it.
struct DeclaredVar<'a> {
    var: Var,
    name: Option<&'a str>,
    ty: TensorType,
}

/// A jump target, checked once the function's blocks are all read.
struct BlockRef<'a> {
    at: Cursor<'a>,
    block: Block,
}

/// What comes before `call`: the result variables, whether the call
/// catches, and the location at the end of the line.
struct Destinations {
    dsts: Vec<Var>,
    catch: bool,
    loc: Loc,
}

/// What comes before `join` or `map.`: the result variables, the
/// location at the end of the line and the tape mode.
struct ForkHead {
    dsts: Vec<Var>,
    loc: Loc,
    tape: TapeMode,
}

/// The header's parameters, each the same as its entry in the `vars:` line.
fn check_params(
    header: Cursor<'_>,
    params: &[DeclaredVar<'_>],
    vars: &EntityVec<Var, VarData>,
) -> Parsed<Vec<Var>> {
    let mut out = Vec::with_capacity(params.len());
    for param in params {
        let var = param.var;
        let Some(declared) = vars.get(var) else {
            return Err(header.error(format!("parameter {var} is not in the `vars:` line")));
        };
        if declared.ty != param.ty || declared.name.as_deref() != param.name {
            return Err(header.error(format!(
                "parameter {var} differs from its entry in the `vars:` line"
            )));
        }
        out.push(var);
    }
    Ok(out)
}

/// A constant as `Scalar`'s `Display` writes it: `true`, `-3_i64`, `0.5_f64`.
fn parse_scalar(text: &str) -> Option<Scalar> {
    match text {
        "true" => return Some(Scalar::Bool(true)),
        "false" => return Some(Scalar::Bool(false)),
        _ => {}
    }
    let (value, suffix) = text.rsplit_once('_')?;
    let scalar = match suffix {
        "i32" => Scalar::I32(value.parse().ok()?),
        "i64" => Scalar::I64(value.parse().ok()?),
        "usize" => Scalar::Usize(value.parse().ok()?),
        "f32" => Scalar::F32(value.parse().ok()?),
        "f64" => Scalar::F64(value.parse().ok()?),
        _ => return None,
    };
    Some(scalar)
}

/// A string as `{:?}` writes it: quoted, with `\"`, `\\`, `\n`, `\r`, `\t`,
/// `\0`, `\'` and `\u{...}` escapes.
fn string_literal(line: &mut Cursor<'_>) -> Parsed<String> {
    line.expect("\"")?;
    let mut out = String::new();
    loop {
        let at = *line;
        let Some(c) = line.peek() else {
            return Err(line.error("unterminated string"));
        };
        line.pos += c.len_utf8();
        match c {
            '"' => return Ok(out),
            '\\' => out.push(escape(line).map_err(|m| at.error(m))?),
            c => out.push(c),
        }
    }
}

/// The character an escape stands for (after its backslash).
fn escape(line: &mut Cursor<'_>) -> Result<char, String> {
    let Some(c) = line.peek() else {
        return Err("unterminated escape".into());
    };
    line.pos += c.len_utf8();
    match c {
        '"' | '\\' | '\'' => Ok(c),
        'n' => Ok('\n'),
        'r' => Ok('\r'),
        't' => Ok('\t'),
        '0' => Ok('\0'),
        'u' => {
            if !line.eat("{") {
                return Err("expected `{` after `\\u`".into());
            }
            let hex = line.take_until(&['}']);
            if !line.eat("}") {
                return Err("unterminated `\\u{...}` escape".into());
            }
            u32::from_str_radix(hex, 16)
                .ok()
                .and_then(char::from_u32)
                .ok_or_else(|| format!("bad escape `\\u{{{hex}}}`"))
        }
        other => Err(format!("unknown escape `\\{other}`")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::print::program_to_string;

    const SAMPLE: &str = "symbols: sym0=N
static s0 X: [f64; N]  @1:1

fn f0 main(v0 n: i64) -> (f64, bool)  @2:1
  vars: v0 n: i64, v1: bool, v2: f64, v3: [f64; N], v4: usize
  sig: (n: i64) -> (f64, (bool,))
b0:  @2:1
  v3 = load_static s0 (X)  @3:5
  v4 = symbol_value sym0  @3:9
  v1, v2 = catch call f1 g(v0)  @4:5
  assert \"a \\\"quoted\\\" \\u{7} message\" v1  @5:5
  branch v1, b1, b1
b1:  @6:1
  return v2, v1

fn f1 g(v0 x: i64) -> (f64)  @8:1
  vars: v0 x: i64, v1: f64, v2: [f64; 3]
b0:  @8:1
  v1 = const -1.5e-7_f64  @9:5
  v2 = fill.3 v1  @9:9
  v1 = cast.f64 v0  @9:13
  return v1
";

    #[test]
    fn a_sample_reads_back_as_written() {
        let program = parse_program(SAMPLE).unwrap();
        assert_eq!(program_to_string(&program), SAMPLE);
        assert_eq!(
            program.functions[FuncId(0)].ret_type,
            Type::Tuple(vec![
                Type::Tensor(TensorType::scalar(ScalarType::F64)),
                Type::Tuple(vec![Type::Tensor(TensorType::scalar(ScalarType::Bool))]),
            ])
        );
        crate::verify::verify_program(&program).unwrap();
    }

    #[test]
    fn comments_and_blank_lines_are_skipped() {
        let text = "// a comment\n\nfn f0 k() -> ()  @1:1\n  vars: \n  // here too\nb0:  @1:1\n  return \n";
        let program = parse_program(text).unwrap();
        assert_eq!(program.functions.len(), 1);
    }

    fn error_of(text: &str) -> (usize, usize, String) {
        let e = parse_program(text).unwrap_err();
        (e.line, e.column, e.message)
    }

    #[test]
    fn errors_name_line_and_column() {
        let header = "fn f0 k(v0 x: i64) -> (i64)  @1:1\n  vars: v0 x: i64, v1: i64\nb0:  @1:1\n";
        let (line, column, message) = error_of(&format!("{header}  v1 = frob v0  @2:2\n"));
        assert_eq!((line, column), (4, 8), "{message}");
        assert!(message.contains("unknown operation `frob`"));
        let (line, column, message) = error_of(&format!("{header}  v1 = add v0, v7  @2:2\n"));
        assert_eq!(
            (line, column, message.as_str()),
            (4, 16, "no variable v7 in the `vars:` line")
        );
        let (line, column, _) = error_of(&format!("{header}  jump b4\n"));
        assert_eq!((line, column), (4, 8));
        let (line, _, message) = error_of(&format!(
            "{header}  v1 = call f0 other(v0)  @2:2\n  return v1\n"
        ));
        assert_eq!((line, message.as_str()), (4, "f0 is `k`, not `other`"));
        let (line, _, message) = error_of(header);
        assert_eq!(line, 3, "{message}");
        let (line, column, _) = error_of("fn f0 k() -> ()\n");
        assert_eq!((line, column), (1, 16));
    }

    #[test]
    fn no_input_panics() {
        // Every prefix, and every line with one character replaced.
        for end in 0..=SAMPLE.len() {
            if SAMPLE.is_char_boundary(end) {
                let _ = parse_program(&SAMPLE[..end]);
            }
        }
        let lines: Vec<&str> = SAMPLE.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            for (at, _) in line.char_indices() {
                for replacement in ["", "[", "(", " ", "v99", "b", "@", "\"", "\\"] {
                    let mut mutated = lines.clone();
                    let changed = format!("{}{replacement}{}", &line[..at], &line[at + 1..]);
                    mutated[i] = &changed;
                    let _ = parse_program(&mutated.join("\n"));
                }
            }
        }
        let deep = format!("static s0 X: {}f64  @1:1\n", "[".repeat(100_000));
        assert!(parse_program(&deep).is_err());
    }
}
