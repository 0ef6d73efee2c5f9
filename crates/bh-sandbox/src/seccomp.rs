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
//!
//! Unix sockets, by [`UnixSockets`]:
//! - `Checked` (the default): every `connect(2)` goes to the sandbox's init
//!   (`SECCOMP_RET_USER_NOTIF`, see `sys::supervise`), which makes it only
//!   to a listener of the command's own or an allowed socket; so does every
//!   `socket`/`socketpair` of `AF_UNIX` (the init makes them in a network
//!   namespace of its own, whose socket table then holds the command's
//!   Unix sockets and nothing else). Unix datagram sockets, which reach a
//!   path by `sendto`/`sendmsg` without a `connect`, cannot be made (a type
//!   other than `SOCK_STREAM` or `SOCK_SEQPACKET` fails with `EACCES`), nor
//!   can `io_uring` rings, which connect past this filter
//!   (`IORING_OP_CONNECT`).
//! - `Denied`: `socket(AF_UNIX, …)` and `io_uring_setup` fail with `EACCES`
//!   (`socketpair` still works).
//! - `Covered`: nothing here (the host's sockets present at the start are
//!   covered by mounts; the fallback where the check cannot run).

use libc::sock_filter;

use crate::UnixSockets;

const BPF_LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
const BPF_JEQ_K: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
const BPF_JGE_K: u16 = 0x35; // BPF_JMP | BPF_JGE | BPF_K
const BPF_AND_K: u16 = 0x54; // BPF_ALU | BPF_AND | BPF_K
const BPF_RET_K: u16 = 0x06; // BPF_RET | BPF_K

const RET_ALLOW: u32 = 0x7fff_0000;
const RET_KILL_PROCESS: u32 = 0x8000_0000;
const RET_ERRNO: u32 = 0x0005_0000;
const RET_USER_NOTIF: u32 = 0x7fc0_0000;

// struct seccomp_data: nr @0, arch @4, instruction_pointer @8, args @16.
const OFF_NR: u32 = 0;
const OFF_ARCH: u32 = 4;
/// Low 32 bits of args[0] (little-endian): `socket(2)`'s domain.
const OFF_ARG0_LO: u32 = 16;
/// Low 32 bits of args[1] (little-endian): an ioctl's request (the kernel
/// reads it as an unsigned int), `socket(2)`'s type.
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
/// `SOCK_TYPE_MASK`: the type without `SOCK_NONBLOCK`/`SOCK_CLOEXEC`.
const SOCK_TYPE_MASK: u32 = 0xf;

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

/// Where a jump of the program goes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Label {
    /// The next instruction.
    Next,
    /// Past the kill of a foreign architecture.
    Native,
    Allow,
    /// `EPERM`.
    Deny,
    /// `EACCES`: a Unix socket the mode refuses.
    DenyUnix,
    /// To the sandbox's init (`Checked`'s `connect`).
    Notify,
    /// The ioctl request's check.
    Ioctl,
    /// `Denied`: any `AF_UNIX` socket.
    UnixAny,
    /// `Checked`: an `AF_UNIX` socket or pair: to the init, or refused
    /// (datagram types).
    UnixType,
}

/// The program as it is written: plain statements and jumps to labels,
/// resolved into relative offsets by [`Asm::finish`].
struct Asm {
    code: Vec<sock_filter>,
    jumps: Vec<(usize, Label, Label)>,
    labels: Vec<(Label, usize)>,
}

impl Asm {
    fn stmt(&mut self, code: u16, k: u32) {
        self.code.push(sock_filter {
            code,
            jt: 0,
            jf: 0,
            k,
        });
    }

    fn jump(&mut self, code: u16, k: u32, jt: Label, jf: Label) {
        self.jumps.push((self.code.len(), jt, jf));
        self.stmt(code, k);
    }

    /// To `to` when the accumulator equals `k`, else on.
    fn when(&mut self, k: u32, to: Label) {
        self.jump(BPF_JEQ_K, k, to, Label::Next);
    }

    fn label(&mut self, l: Label) {
        self.labels.push((l, self.code.len()));
    }

    /// The program with every jump's offset counted from the instruction
    /// after it. A jump past 255 instructions cannot be written in classic
    /// BPF; the program stays far below that.
    fn finish(mut self) -> Vec<sock_filter> {
        let at = |labels: &[(Label, usize)], l: Label, from: usize| -> u8 {
            if l == Label::Next {
                return 0;
            }
            let to = labels
                .iter()
                .find(|(k, _)| *k == l)
                .map_or(from + 1, |(_, i)| *i);
            u8::try_from(to - from - 1).unwrap_or(0)
        };
        for (i, jt, jf) in std::mem::take(&mut self.jumps) {
            self.code[i].jt = at(&self.labels, jt, i);
            self.code[i].jf = at(&self.labels, jf, i);
        }
        self.code
    }
}

/// The program for `unix`, ready for `seccomp(2)`. The dispatch on the
/// system call's number comes first (the accumulator holds it); each
/// block that loads an argument ends in a verdict.
pub(crate) fn program(unix: UnixSockets) -> Vec<sock_filter> {
    let mut a = Asm {
        code: Vec::new(),
        jumps: Vec::new(),
        labels: Vec::new(),
    };
    a.stmt(BPF_LD_W_ABS, OFF_ARCH);
    a.jump(BPF_JEQ_K, AUDIT_ARCH, Label::Native, Label::Next);
    a.stmt(BPF_RET_K, RET_KILL_PROCESS);
    a.label(Label::Native);
    a.stmt(BPF_LD_W_ABS, OFF_NR);
    #[cfg(target_arch = "x86_64")]
    a.jump(BPF_JGE_K, X32_SYSCALL_BIT, Label::Deny, Label::Next);
    for nr in denied() {
        a.when(nr, Label::Deny);
    }
    a.when(libc::SYS_ioctl as u32, Label::Ioctl);
    match unix {
        UnixSockets::Covered => {}
        UnixSockets::Denied => {
            // io_uring makes sockets and connects without the `socket(2)`
            // and `connect(2)` calls this filter sees: no rings.
            a.when(libc::SYS_io_uring_setup as u32, Label::DenyUnix);
            a.when(libc::SYS_socket as u32, Label::UnixAny);
        }
        UnixSockets::Checked => {
            a.when(libc::SYS_io_uring_setup as u32, Label::DenyUnix);
            a.when(libc::SYS_socket as u32, Label::UnixType);
            a.when(libc::SYS_socketpair as u32, Label::UnixType);
            a.when(libc::SYS_connect as u32, Label::Notify);
        }
    }
    a.stmt(BPF_RET_K, RET_ALLOW);

    a.label(Label::Ioctl);
    a.stmt(BPF_LD_W_ABS, OFF_ARG1_LO);
    a.when(TIOCSTI, Label::Deny);
    a.jump(BPF_JEQ_K, TIOCLINUX, Label::Deny, Label::Allow);

    if unix == UnixSockets::Denied {
        a.label(Label::UnixAny);
        a.stmt(BPF_LD_W_ABS, OFF_ARG0_LO);
        a.jump(
            BPF_JEQ_K,
            libc::AF_UNIX as u32,
            Label::DenyUnix,
            Label::Allow,
        );
    }
    if unix == UnixSockets::Checked {
        a.label(Label::UnixType);
        a.stmt(BPF_LD_W_ABS, OFF_ARG0_LO);
        a.jump(BPF_JEQ_K, libc::AF_UNIX as u32, Label::Next, Label::Allow);
        a.stmt(BPF_LD_W_ABS, OFF_ARG1_LO);
        a.stmt(BPF_AND_K, SOCK_TYPE_MASK);
        // Made by the init, in its own network namespace.
        a.when(libc::SOCK_STREAM as u32, Label::Notify);
        a.jump(
            BPF_JEQ_K,
            libc::SOCK_SEQPACKET as u32,
            Label::Notify,
            Label::DenyUnix,
        );
    }

    a.label(Label::Allow);
    a.stmt(BPF_RET_K, RET_ALLOW);
    a.label(Label::Deny);
    a.stmt(BPF_RET_K, RET_ERRNO | libc::EPERM as u32);
    a.label(Label::DenyUnix);
    a.stmt(BPF_RET_K, RET_ERRNO | libc::EACCES as u32);
    if unix == UnixSockets::Checked {
        a.label(Label::Notify);
        a.stmt(BPF_RET_K, RET_USER_NOTIF);
    }
    a.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `p` the way the kernel does on one system call (arch, nr and
    /// the low halves of the first two arguments): the verdict.
    fn run(p: &[sock_filter], arch: u32, nr: u32, arg0: u32, arg1: u32) -> u32 {
        let (mut pc, mut acc) = (0usize, 0u32);
        for _ in 0..p.len() + 1 {
            let f = &p[pc];
            pc += 1;
            match f.code {
                BPF_LD_W_ABS => {
                    acc = match f.k {
                        OFF_ARCH => arch,
                        OFF_NR => nr,
                        OFF_ARG0_LO => arg0,
                        OFF_ARG1_LO => arg1,
                        k => panic!("load of offset {k}"),
                    }
                }
                BPF_AND_K => acc &= f.k,
                BPF_JEQ_K | BPF_JGE_K => {
                    let taken = if f.code == BPF_JEQ_K {
                        acc == f.k
                    } else {
                        acc >= f.k
                    };
                    pc += usize::from(if taken { f.jt } else { f.jf });
                }
                BPF_RET_K => return f.k,
                c => panic!("opcode {c:#x}"),
            }
            assert!(pc < p.len(), "ran off the end");
        }
        panic!("a loop");
    }

    const EPERM: u32 = RET_ERRNO | libc::EPERM as u32;
    const EACCES: u32 = RET_ERRNO | libc::EACCES as u32;
    const AF_UNIX: u32 = libc::AF_UNIX as u32;
    const AF_INET: u32 = libc::AF_INET as u32;

    fn call(p: &[sock_filter], nr: libc::c_long, arg0: u32, arg1: u32) -> u32 {
        run(p, AUDIT_ARCH, nr as u32, arg0, arg1)
    }

    #[test]
    fn the_deny_list_holds_in_every_mode() {
        for mode in [
            UnixSockets::Checked,
            UnixSockets::Covered,
            UnixSockets::Denied,
        ] {
            let p = program(mode);
            assert_eq!(run(&p, 0x4000_0003, 1, 0, 0), RET_KILL_PROCESS, "i386");
            #[cfg(target_arch = "x86_64")]
            assert_eq!(run(&p, AUDIT_ARCH, X32_SYSCALL_BIT | 41, 0, 0), EPERM);
            for nr in denied() {
                assert_eq!(run(&p, AUDIT_ARCH, nr, 0, 0), EPERM, "syscall {nr}");
            }
            assert_eq!(call(&p, libc::SYS_ioctl, 0, TIOCSTI), EPERM);
            assert_eq!(call(&p, libc::SYS_ioctl, 0, TIOCLINUX), EPERM);
            assert_eq!(call(&p, libc::SYS_ioctl, 0, 0x5401), RET_ALLOW, "TCGETS");
            assert_eq!(call(&p, libc::SYS_read, 0, 0), RET_ALLOW);
            assert_eq!(call(&p, libc::SYS_socket, AF_INET, 1), RET_ALLOW);
            assert_eq!(call(&p, libc::SYS_socketpair, AF_INET, 1), RET_ALLOW);
        }
    }

    #[test]
    fn unix_sockets_by_mode() {
        let stream = libc::SOCK_STREAM as u32 | libc::SOCK_CLOEXEC as u32;
        let seqpacket = libc::SOCK_SEQPACKET as u32 | libc::SOCK_NONBLOCK as u32;
        let dgram = libc::SOCK_DGRAM as u32 | libc::SOCK_CLOEXEC as u32;
        let raw = libc::SOCK_RAW as u32; // AF_UNIX takes it as SOCK_DGRAM

        let p = program(UnixSockets::Checked);
        assert_eq!(call(&p, libc::SYS_connect, 3, 0), RET_USER_NOTIF);
        assert_eq!(call(&p, libc::SYS_socket, AF_UNIX, stream), RET_USER_NOTIF);
        assert_eq!(
            call(&p, libc::SYS_socket, AF_UNIX, seqpacket),
            RET_USER_NOTIF
        );
        for t in [dgram, raw, 6, 15] {
            assert_eq!(call(&p, libc::SYS_socket, AF_UNIX, t), EACCES, "type {t}");
            assert_eq!(call(&p, libc::SYS_socketpair, AF_UNIX, t), EACCES);
        }
        assert_eq!(call(&p, libc::SYS_socket, AF_INET, dgram), RET_ALLOW);
        assert_eq!(
            call(&p, libc::SYS_socketpair, AF_UNIX, stream),
            RET_USER_NOTIF
        );
        assert_eq!(call(&p, libc::SYS_io_uring_setup, 1, 0), EACCES);
        assert_eq!(call(&p, libc::SYS_sendto, 3, 0), RET_ALLOW);

        let p = program(UnixSockets::Denied);
        assert_eq!(call(&p, libc::SYS_connect, 3, 0), RET_ALLOW);
        assert_eq!(call(&p, libc::SYS_socket, AF_UNIX, stream), EACCES);
        assert_eq!(call(&p, libc::SYS_socket, AF_INET, stream), RET_ALLOW);
        assert_eq!(call(&p, libc::SYS_socketpair, AF_UNIX, dgram), RET_ALLOW);
        assert_eq!(call(&p, libc::SYS_io_uring_setup, 1, 0), EACCES);

        let p = program(UnixSockets::Covered);
        assert_eq!(call(&p, libc::SYS_connect, 3, 0), RET_ALLOW);
        assert_eq!(call(&p, libc::SYS_socket, AF_UNIX, dgram), RET_ALLOW);
        assert_eq!(call(&p, libc::SYS_io_uring_setup, 1, 0), RET_ALLOW);
        assert!(
            !p.iter().any(|f| f.k == RET_USER_NOTIF),
            "no notification without the init's check"
        );
    }
}
