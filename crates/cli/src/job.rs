//! The command as the ranks of a job: which transport (MPI when an MPI
//! launcher started this process and the `mpi` feature is built in, else
//! one process), and the checks and messages every command's ranks share.

use autobatch::shard::{wire, Communicator, RankFailure, Single};

use crate::Failure;

/// The ranks this command runs as.
pub enum Job {
    Single(Single),
    #[cfg(feature = "mpi")]
    Mpi(crate::mpi::Mpi),
}

impl Job {
    /// One process, or (built with `mpi`, started by an MPI launcher as
    /// one of several ranks) this rank of the job.
    #[cfg(feature = "mpi")]
    pub fn start() -> Result<Job, String> {
        if launched_as().is_none() {
            return Ok(Job::Single(Single));
        }
        let mpi = crate::mpi::Mpi::start().ok_or("MPI could not be initialized")?;
        if mpi.size() > 1 {
            crate::mpi::exit_2_on_crash(mpi.rank());
        }
        Ok(Job::Mpi(mpi))
    }

    /// One process. Started by an MPI launcher as one of several ranks, an
    /// error: every rank would run the whole batch and write the outputs.
    #[cfg(not(feature = "mpi"))]
    pub fn start() -> Result<Job, String> {
        match launched_as() {
            Some(Launched { rank, size }) if rank > 0 || size > 1 => Err(
                "started by an MPI launcher as one of several ranks, but this autobatch was \
                 built without MPI (build it with `cargo build --release --features mpi`)"
                    .to_string(),
            ),
            _ => Ok(Job::Single(Single)),
        }
    }

    pub fn comm(&self) -> &dyn Communicator {
        match self {
            Job::Single(single) => single,
            #[cfg(feature = "mpi")]
            Job::Mpi(mpi) => mpi,
        }
    }
}

/// What an MPI launcher (Open MPI's `mpirun`, MPICH's Hydra, Slurm's `srun`
/// with PMI or PMIx) told this process in its environment.
#[cfg_attr(feature = "mpi", allow(dead_code))]
struct Launched {
    rank: usize,
    /// 0 when the launcher does not say.
    size: usize,
}

fn launched_as() -> Option<Launched> {
    let number = |names: &[&str]| {
        names
            .iter()
            .find_map(|name| std::env::var(name).ok()?.trim().parse::<usize>().ok())
    };
    let rank = number(&["OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"])?;
    let size = number(&["OMPI_COMM_WORLD_SIZE", "PMI_SIZE"]).unwrap_or(0);
    Some(Launched { rank, size })
}

/// Checks that every rank was started with the arguments rank 0 was (a
/// launcher can start ranks with different ones; the ranks must agree on
/// what they compute): the message names the first rank that was not.
pub fn same_arguments(comm: &dyn Communicator) -> Result<(), String> {
    if comm.size() == 1 {
        return Ok(());
    }
    let mine: Vec<String> = std::env::args_os()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let mut w = wire::Writer::new();
    w.usize(mine.len());
    mine.iter().for_each(|a| w.str(a));
    let all = comm.all_gather(w.finish());
    let root = &all[0];
    match all.iter().position(|a| a != root) {
        None => Ok(()),
        Some(rank) => {
            let theirs = read_texts(&all[rank]).unwrap_or_default();
            Err(format!(
                "rank {rank} was started with other arguments than rank 0 (`{}` instead of `{}`); \
                 every rank must get the same ones",
                theirs.join(" "),
                mine_of(root).join(" ")
            ))
        }
    }
}

fn mine_of(bytes: &[u8]) -> Vec<String> {
    read_texts(bytes).unwrap_or_default()
}

fn read_texts(bytes: &[u8]) -> Result<Vec<String>, wire::WireError> {
    let mut r = wire::Reader::new(bytes);
    let n = r.usize()?;
    (0..n).map(|_| r.str()).collect()
}

/// Rank 0's texts (given there: what it read, or the failure that stops
/// the job before anything runs) on every rank. The other ranks get
/// [`Failure::Elsewhere`] when rank 0 stopped; rank 0 gets its own texts back
/// (or nothing, having failed: it reports its own failure).
pub fn share_texts(
    comm: &dyn Communicator,
    root: Option<Result<Vec<String>, &Failure>>,
) -> Result<Vec<String>, Failure> {
    if comm.size() == 1 {
        return Ok(match root {
            Some(Ok(texts)) => texts,
            _ => Vec::new(),
        });
    }
    let message = root.map(|texts| {
        let mut w = wire::Writer::new();
        match texts {
            Ok(texts) => {
                w.bool(true);
                w.usize(texts.len());
                texts.iter().for_each(|t| w.str(t));
            }
            Err(_) => w.bool(false),
        }
        w.finish()
    });
    let bytes = comm.broadcast(message);
    let mut r = wire::Reader::new(&bytes);
    match r.bool() {
        Ok(true) => {
            let n = r.usize().map_err(|_| Failure::Elsewhere)?;
            (0..n)
                .map(|_| r.str().map_err(|_| Failure::Elsewhere))
                .collect()
        }
        _ => Err(Failure::Elsewhere),
    }
}

/// A failed rank as the error rank 0 prints; in one process, the failure
/// as one process has always reported it.
pub fn rank_failure(comm: &dyn Communicator, failure: RankFailure) -> Failure {
    if comm.size() == 1 {
        Failure::Usage(failure.message)
    } else {
        Failure::Usage(failure.to_string())
    }
}

/// Rank 0's exit code, on every rank: the job ends with one code.
pub fn agree_on_exit_code(comm: &dyn Communicator, code: u8) -> u8 {
    if comm.size() == 1 {
        return code;
    }
    comm.broadcast(Some(vec![code]))
        .first()
        .copied()
        .unwrap_or(2)
}
