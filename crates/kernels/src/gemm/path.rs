//! The CPU paths of the products ([`Path`]: portable, AVX2+FMA and AVX-512
//! on x86-64, NEON on aarch64), which this CPU runs, and the environment
//! variable that caps them.

use crate::internal_error;

/// A CPU path of the products. Every path gives every output element the
/// same bits; [`Path::detected`] is the fastest this CPU runs (at most the
/// one [`SIMD_VARIABLE`] names), and the `*_on` functions run a given path
/// (for the tests that compare them). Paths are ordered slowest first
/// (the order only compares the paths of one architecture, [`Path::ALL`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Path {
    /// Arrays of lanes and `mul_add`, on any CPU.
    Portable,
    /// 128-bit NEON (aarch64) for the products; the rest is the portable
    /// code, which NEON (part of every aarch64 CPU) already vectorizes.
    Neon,
    /// 256-bit AVX2 and FMA (x86-64).
    Avx2,
    /// 512-bit AVX-512 (F, VL, DQ) for the products, AVX2 for the rest.
    Avx512,
}

/// The environment variable that caps the kernels' path: one of
/// [`Path::ALL`]'s names (`portable`, `avx2`, `avx512` on x86-64;
/// `portable`, `neon` on aarch64), read once per process. It only lowers the path (a
/// CPU without AVX-512 stays on AVX2 whatever it says), so an AVX-512 CPU
/// can run and measure the AVX2 path; every path gives the same bits. The
/// kernels ignore any other value; [`requested_path`] reports it as an
/// error, for a program to show its user.
pub const SIMD_VARIABLE: &str = "AUTOBATCH_SIMD";

impl Path {
    /// Every path of this CPU architecture, slowest first.
    #[cfg(not(target_arch = "aarch64"))]
    pub const ALL: [Path; 3] = [Path::Portable, Path::Avx2, Path::Avx512];
    /// Every path of this CPU architecture, slowest first.
    #[cfg(target_arch = "aarch64")]
    pub const ALL: [Path; 2] = [Path::Portable, Path::Neon];

    /// The fastest path of this CPU architecture.
    const FASTEST: Path = Path::ALL[Path::ALL.len() - 1];

    /// Its name, as [`SIMD_VARIABLE`] takes it.
    pub fn name(self) -> &'static str {
        match self {
            Path::Portable => "portable",
            Path::Neon => "neon",
            Path::Avx2 => "avx2",
            Path::Avx512 => "avx512",
        }
    }

    /// The path of that name, if it is one of this CPU architecture's.
    pub fn from_name(name: &str) -> Option<Path> {
        Path::ALL.into_iter().find(|p| p.name() == name)
    }

    /// Whether the kernels may run the path here: this CPU has it and
    /// [`SIMD_VARIABLE`] allows it (tested once, then cached).
    pub fn available(self) -> bool {
        match self {
            Path::Portable => true,
            Path::Neon => neon_available(),
            Path::Avx2 => crate::vmath::fast_path_available(),
            Path::Avx512 => avx512_available(),
        }
    }

    /// The fastest path the kernels may run here.
    #[inline]
    pub fn detected() -> Path {
        if avx512_available() {
            Path::Avx512
        } else if crate::vmath::fast_path_available() {
            Path::Avx2
        } else if neon_available() {
            Path::Neon
        } else {
            Path::Portable
        }
    }

    pub(super) fn check(self, what: &str) {
        if !self.available() {
            internal_error(format!(
                "gemm::{what}: this CPU cannot run the {self:?} path"
            ));
        }
    }
}

/// The path [`SIMD_VARIABLE`] asks for now: `Ok(None)` when it is unset,
/// an error naming the variable, its value and the accepted names when it
/// names no path.
pub fn requested_path() -> Result<Option<Path>, String> {
    let Some(value) = std::env::var_os(SIMD_VARIABLE) else {
        return Ok(None);
    };
    let text = value.to_string_lossy();
    Path::from_name(text.trim()).map(Some).ok_or_else(|| {
        let names: Vec<&str> = Path::ALL.iter().map(|p| p.name()).collect();
        format!(
            "{SIMD_VARIABLE} is `{text}`; it takes one of {}",
            names.join(", ")
        )
    })
}

/// The fastest path the kernels may take: [`SIMD_VARIABLE`]'s, read once
/// (the fastest of all when it is unset or names no path).
#[inline]
pub(crate) fn ceiling() -> Path {
    static CEILING: std::sync::OnceLock<Path> = std::sync::OnceLock::new();
    *CEILING.get_or_init(|| requested_path().ok().flatten().unwrap_or(Path::FASTEST))
}

/// Whether the NEON path may run: on aarch64 (every such CPU has NEON)
/// when [`SIMD_VARIABLE`] allows it.
#[inline]
fn neon_available() -> bool {
    cfg!(target_arch = "aarch64") && ceiling() >= Path::Neon
}

#[inline]
fn avx512_available() -> bool {
    ceiling() >= Path::Avx512 && cpu_has_avx512()
}

/// Whether this CPU has AVX-512 (F, VL, DQ) besides AVX2 and FMA.
#[inline]
fn cpu_has_avx512() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        crate::vmath::cpu_has_avx2_fma()
            && std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512vl")
            && std::arch::is_x86_feature_detected!("avx512dq")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}
