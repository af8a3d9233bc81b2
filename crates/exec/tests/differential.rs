//! Differential tests: random well-typed programs (nested `if`, `while`,
//! `for`, `break`, `continue`, calls, bounded recursion, arrays, tuples,
//! member errors and random draws) run under every registered strategy,
//! with every lanes mode and block choice it reads, and every member must get exactly what the reference
//! executor gives it, errors and statistics-independent results included.
//!
//! The generator is driven by one seed that proptest picks, so a failure
//! prints the seed and the program text (`SHOW_PROGRAMS=1` prints every
//! program generated).

use autobatch_exec::{run, Arg, Batch, Env, RunOptions, Strategy};
use autobatch_types::{Scalar, Tensor};
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Writes a random program whose entry is `fn main(x: i64, y: i64) -> (i64, i64)`.
struct Generator {
    rng: ChaCha8Rng,
    /// Mutable `i64` variables in scope, innermost last, with the scope depth at which each was declared.
    scalars: Vec<String>,
    fresh: usize,
    in_loop: bool,
    helpers: usize,
    /// Whether the array `table` is in scope (in `main`, not in the helpers).
    has_table: bool,
}

impl Generator {
    fn new(seed: u64) -> Self {
        Generator {
            rng: ChaCha8Rng::seed_from_u64(seed),
            scalars: Vec::new(),
            fresh: 0,
            in_loop: false,
            helpers: 0,
            has_table: false,
        }
    }

    fn name(&mut self, prefix: &str) -> String {
        self.fresh += 1;
        format!("{prefix}{}", self.fresh)
    }

    fn pick<'a>(&mut self, items: &'a [&'a str]) -> &'a str {
        items[self.rng.gen_range(0..items.len())]
    }

    fn int_expr(&mut self, depth: u32) -> String {
        let choice = if depth == 0 {
            self.rng.gen_range(0..2)
        } else {
            self.rng.gen_range(0..13)
        };
        match choice {
            0 => format!("{}", self.rng.gen_range(-6i64..20)),
            1 if !self.scalars.is_empty() => {
                self.scalars[self.rng.gen_range(0..self.scalars.len())].clone()
            }
            1 => "3".into(),
            2..=4 => {
                let op = self
                    .pick(&["+", "-", "*", "+", "-", "&", "|", "^"])
                    .to_string();
                format!(
                    "({} {op} {})",
                    self.int_expr(depth - 1),
                    self.int_expr(depth - 1)
                )
            }
            5 => {
                // May divide by zero: a member error for some members only.
                let op = self.pick(&["/", "%"]).to_string();
                format!(
                    "({} {op} ({} % 7))",
                    self.int_expr(depth - 1),
                    self.int_expr(depth - 1)
                )
            }
            6 => format!(
                "(if {} {{ {} }} else {{ {} }})",
                self.bool_expr(depth - 1),
                self.int_expr(depth - 1),
                self.int_expr(depth - 1)
            ),
            7 if self.helpers > 0 => {
                let h = self.rng.gen_range(0..self.helpers);
                format!(
                    "helper{h}({} % 6, {})",
                    self.int_expr(depth - 1),
                    self.int_expr(depth - 1)
                )
            }
            8 if self.has_table => format!("table[(({}) & 7) as usize]", self.int_expr(depth - 1)),
            8 => format!("({} >> 1)", self.int_expr(depth - 1)),
            9 => format!("((uniform() * 10.0) as i64 + {})", self.int_expr(depth - 1)),
            10 => format!(
                "pair({}).{}",
                self.int_expr(depth - 1),
                self.rng.gen_range(0..2)
            ),
            11 if self.has_table => {
                let reduce = self
                    .pick(&[
                        "sum(vector)",
                        "dot(vector, vector)",
                        "max(vector)",
                        "vector[1].sqrt()",
                    ])
                    .to_string();
                format!("(({reduce}) as i64 % 1000)")
            }
            _ => format!("{}.abs().min(1000)", self.int_expr(depth - 1)),
        }
    }

    fn bool_expr(&mut self, depth: u32) -> String {
        match self.rng.gen_range(0..4) {
            0 if depth > 0 => format!(
                "({} && {})",
                self.bool_expr(depth - 1),
                self.bool_expr(depth - 1)
            ),
            1 if depth > 0 => format!(
                "({} || !{})",
                self.bool_expr(depth - 1),
                self.bool_expr(depth - 1)
            ),
            _ => {
                let op = self.pick(&["<", "<=", ">", ">=", "==", "!="]).to_string();
                let d = depth.saturating_sub(1);
                format!("({} {op} {})", self.int_expr(d), self.int_expr(d))
            }
        }
    }

    fn block(&mut self, depth: u32, statements: usize) -> String {
        let mark = self.scalars.len();
        let mut out = String::new();
        for _ in 0..statements {
            out.push_str(&self.statement(depth));
            out.push('\n');
        }
        self.scalars.truncate(mark);
        out
    }

    fn statement(&mut self, depth: u32) -> String {
        let choice = if depth == 0 {
            self.rng.gen_range(0..3)
        } else {
            self.rng.gen_range(0..11)
        };
        match choice {
            0 | 1 => {
                let v = self.name("v");
                let e = self.int_expr(2);
                self.scalars.push(v.clone());
                format!("let mut {v}: i64 = {e};")
            }
            2 if !self.scalars.is_empty() => {
                let v = self.scalars[self.rng.gen_range(0..self.scalars.len())].clone();
                let op = self.pick(&["=", "+=", "-=", "*="]).to_string();
                format!("{v} {op} {};", self.int_expr(2))
            }
            2 => "table[1] += 1;".into(),
            3 => format!(
                "if {} {{\n{}}} else {{\n{}}}",
                self.bool_expr(1),
                self.block(depth - 1, 2),
                self.block(depth - 1, 1)
            ),
            4 => {
                let (i, limit) = (self.name("i"), self.name("limit"));
                let bound = self.int_expr(1);
                let was = std::mem::replace(&mut self.in_loop, true);
                let body = self.block(depth - 1, 2);
                let exit = self.bool_expr(1);
                self.in_loop = was;
                format!(
                    "let mut {i}: i64 = 0;\nlet {limit}: i64 = ({bound}) % 5;\nwhile {i} < {limit} {{\n{i} += 1;\n{body}if {exit} {{ break; }}\n}}"
                )
            }
            5 => {
                let j = self.name("j");
                let (low, high) = (self.int_expr(1), self.int_expr(1));
                let was = std::mem::replace(&mut self.in_loop, true);
                let skip = self.bool_expr(1);
                let body = self.block(depth - 1, 2);
                self.in_loop = was;
                format!(
                    "for {j} in ({low} % 3)..({high} % 4) {{\nif {skip} {{ continue; }}\n{body}}}"
                )
            }
            6 => format!(
                "table[(({}) & 3) as usize] = {};",
                self.int_expr(1),
                self.int_expr(2)
            ),
            7 if self.in_loop => format!("if {} {{ break; }}", self.bool_expr(1)),
            9 if self.has_table => {
                let scale = self.int_expr(1);
                match self.rng.gen_range(0..3) {
                    0 => format!("vector = vector * 0.5 + ({scale} as f64);"),
                    1 => format!("vector[(({scale}) & 1) as usize] -= vector[2].abs();"),
                    _ => format!(
                        "vector = select({}, softmax(vector), vector.tanh());",
                        self.bool_expr(0)
                    ),
                }
            }
            8 => format!("assert!({} != 13, \"unlucky\");", self.int_expr(1)),
            _ if !self.scalars.is_empty() => {
                let v = self.scalars[self.rng.gen_range(0..self.scalars.len())].clone();
                format!("{v} = {v} % 1000;")
            }
            _ => "table[0] -= 1;".into(),
        }
    }

    fn program(&mut self) -> String {
        let mut out = String::from("fn pair(a: i64) -> (i64, i64) { (a * 2, a - 1) }\n");
        let helpers = self.rng.gen_range(0..3);
        for h in 0..helpers {
            // A recursive helper of bounded depth; some recurse twice (not in tail position).
            self.scalars = vec!["n".into(), "a".into()];
            let step = self.int_expr(2);
            let combine = self.int_expr(1);
            let body = if self.rng.gen_bool(0.5) {
                format!("if n <= 0 {{ a }} else {{ let t: i64 = helper{h}(n - 1, a + {step}); t + {combine} }}")
            } else {
                format!(
                    "if n <= 0 {{ a }} else {{ helper{h}(n - 1, {step}) - helper{h}(n - 2, a) }}"
                )
            };
            out.push_str(&format!(
                "fn helper{h}(n: i64, a: i64) -> i64 {{ {body} }}\n"
            ));
            self.helpers = h + 1;
        }
        self.scalars = vec!["x".into(), "y".into()];
        self.has_table = true;
        let body = self.block(3, 5);
        let result = self.int_expr(2);
        out.push_str(&format!(
            "fn main(x: i64, y: i64) -> (i64, i64) {{\nlet mut x: i64 = x;\nlet mut y: i64 = y;\nlet mut table: [i64; 8] = [1, 2, 3, 4, 5, 6, 7, 8];\nlet mut vector: [f64; 3] = [x as f64, y as f64, 1.5];\n{body}\n({result}, table[2] + x - y)\n}}\n"
        ));
        out
    }
}

fn i64_tensor(v: i64) -> Tensor {
    Tensor::scalar(Scalar::I64(v))
}

fn check_program(seed: u64) {
    let mut generator = Generator::new(seed);
    let source = generator.program();
    if std::env::var_os("SHOW_PROGRAMS").is_some() {
        eprintln!("{source}");
    }
    let mut program = match autobatch_lower::compile(&source) {
        Ok(p) => p,
        Err(d) => panic!(
            "seed {seed}: generated program does not compile: {:?}\n{source}",
            d.iter().map(|d| (&d.message, d.loc)).collect::<Vec<_>>()
        ),
    };
    autobatch_passes::optimize(&mut program);
    autobatch_ir::verify::verify_program(&program)
        .unwrap_or_else(|e| panic!("seed {seed}: {e:?}\n{source}"));
    let entry = program.function_by_name("main").expect("main");
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5eed);
    let size = rng.gen_range(1..9);
    let xs: Vec<Tensor> = (0..size)
        .map(|_| i64_tensor(rng.gen_range(-10..40)))
        .collect();
    let y_shared = rng.gen_bool(0.3);
    let y = if y_shared {
        Arg::Shared(i64_tensor(rng.gen_range(-5..9)))
    } else {
        Arg::Batched(
            (0..size)
                .map(|_| i64_tensor(rng.gen_range(-5..9)))
                .collect(),
        )
    };
    let batch = Batch {
        entry,
        size,
        args: vec![Arg::Batched(xs), y],
    };
    let options = RunOptions {
        max_stack_depth: rng.gen_range(3..12),
        max_steps: rng.gen_range(50..3000),
        seed: rng.gen(),
        threads: 1,
        ..RunOptions::default()
    };
    let env = Env::default();
    let reference = run(Strategy::Reference, &program, &env, &batch, &options).unwrap();
    let others = Strategy::ALL
        .into_iter()
        .filter(|s| *s != Strategy::Reference);
    for strategy in others {
        for batching in strategy.configurations() {
            let output = run(
                strategy,
                &program,
                &env,
                &batch,
                &RunOptions {
                    batching,
                    ..options.clone()
                },
            )
            .unwrap();
            assert_eq!(
                output.results, reference.results,
                "seed {seed}: {strategy} {} {} differs from the reference\n{source}",
                batching.lanes, batching.block_choice
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, failure_persistence: None, .. ProptestConfig::default() })]
    #[test]
    fn every_strategy_matches_the_reference_on_random_programs(seed in any::<u64>()) {
        check_program(seed);
    }
}

#[test]
fn a_few_fixed_seeds() {
    for seed in 0..40 {
        check_program(seed);
    }
}
