//! The seccomp program the command runs under: a short deny-list for what
//! Landlock does not mediate, built by the parent as classic BPF (installed
//! by `sys::command`, after Landlock and the capability drop).
//!
//! Denied with `EPERM`: the new mount API (`fsopen`, `fsconfig`, `fsmount`,
//! `fspick`, `move_mount`, `open_tree`, `open_tree_attr`, `mount_setattr`),
//! `open_by_handle_at`, `ptrace`, `process_vm_writev`, `keyctl`, `add_key`,
//! `request_key`, `init_module`, `finit_module`, `delete_module`, `bpf`, and
//! `ioctl` with `TIOCSTI` or `TIOCLINUX`. A foreign architecture (e.g. i386
//! through `int 0x80`) kills the process; x32 system calls are denied.

use libc::sock_filter;

const BPF_LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
const BPF_JEQ_K: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
const BPF_JGE_K: u16 = 0x35; // BPF_JMP | BPF_JGE | BPF_K
const BPF_RET_K: u16 = 0x06; // BPF_RET | BPF_K

const RET_ALLOW: u32 = 0x7fff_0000;
const RET_KILL_PROCESS: u32 = 0x8000_0000;
const RET_ERRNO: u32 = 0x0005_0000;

// struct seccomp_data: nr @0, arch @4, instruction_pointer @8, args @16.
const OFF_NR: u32 = 0;
const OFF_ARCH: u32 = 4;
/// Low 32 bits of args[1] (little-endian); the kernel reads an ioctl's
/// request as an unsigned int.
const OFF_ARG1_LO: u32 = 16 + 8;

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xc000_003e;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xc000_00b7;
#[cfg(target_arch = "x86_64")]
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

const TIOCSTI: u32 = 0x5412;
const TIOCLINUX: u32 = 0x541c;
const OPEN_TREE_ATTR: u32 = 467;

/// The system calls denied outright.
fn denied() -> Vec<u32> {
    let nrs = [
        libc::SYS_fsopen,
        libc::SYS_fsconfig,
        libc::SYS_fsmount,
        libc::SYS_fspick,
        libc::SYS_move_mount,
        libc::SYS_open_tree,
        libc::SYS_mount_setattr,
        libc::SYS_open_by_handle_at,
        libc::SYS_ptrace,
        libc::SYS_process_vm_writev,
        libc::SYS_keyctl,
        libc::SYS_add_key,
        libc::SYS_request_key,
        libc::SYS_init_module,
        libc::SYS_finit_module,
        libc::SYS_delete_module,
        libc::SYS_bpf,
    ];
    let mut v: Vec<u32> = nrs.iter().map(|n| *n as u32).collect();
    v.push(OPEN_TREE_ATTR);
    v
}

fn stmt(code: u16, k: u32) -> sock_filter {
    sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> sock_filter {
    sock_filter { code, jt, jf, k }
}

/// The program, ready for `PR_SET_SECCOMP`.
pub(crate) fn program() -> Vec<sock_filter> {
    let deny = denied();
    let mut p = vec![
        stmt(BPF_LD_W_ABS, OFF_ARCH),
        jump(BPF_JEQ_K, AUDIT_ARCH, 1, 0),
        stmt(BPF_RET_K, RET_KILL_PROCESS),
        stmt(BPF_LD_W_ABS, OFF_NR),
    ];
    // Layout after the load: [x32 check], one jeq per denied call, the
    // ioctl check (jeq + load + 2 jeq), allow, deny.
    // Each jump's target is counted from the instruction after it.
    let tail_after_list = 4; // ioctl jeq, ld arg, jeq TIOCSTI, jeq TIOCLINUX
    let n = deny.len();
    #[cfg(target_arch = "x86_64")]
    {
        // to deny: skip the n denials, the 4 ioctl instructions and allow.
        let to_deny = (n + tail_after_list + 1) as u8;
        p.push(jump(BPF_JGE_K, X32_SYSCALL_BIT, to_deny, 0));
    }
    for (i, nr) in deny.iter().enumerate() {
        let to_deny = (n - i - 1 + tail_after_list + 1) as u8;
        p.push(jump(BPF_JEQ_K, *nr, to_deny, 0));
    }
    // ioctl: not ioctl → allow (skip 3); else load the request.
    p.push(jump(BPF_JEQ_K, libc::SYS_ioctl as u32, 0, 3));
    p.push(stmt(BPF_LD_W_ABS, OFF_ARG1_LO));
    p.push(jump(BPF_JEQ_K, TIOCSTI, 2, 0));
    p.push(jump(BPF_JEQ_K, TIOCLINUX, 1, 0));
    p.push(stmt(BPF_RET_K, RET_ALLOW));
    p.push(stmt(BPF_RET_K, RET_ERRNO | libc::EPERM as u32));
    p
}
