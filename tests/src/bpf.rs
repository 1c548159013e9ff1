//! Programs, attachments, links and bpffs pins made by tests, each undone
//! on drop.

use std::ffi::CString;
use std::fs;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

use agent::bpf::AttachType;
use agent::bpf::sys;
use aya_obj::btf::{Btf, BtfType, Func, FuncLinkage, FuncProto, Int, IntEncoding};
use aya_obj::generated::{bpf_func_info, bpf_prog_type};

use crate::cgroup::open_dir;

/// Program types used by the fixtures.
pub mod prog_type {
    use super::bpf_prog_type::*;
    pub const SOCK_ADDR: u32 = BPF_PROG_TYPE_CGROUP_SOCK_ADDR as u32;
    pub const SOCK: u32 = BPF_PROG_TYPE_CGROUP_SOCK as u32;
    pub const DEVICE: u32 = BPF_PROG_TYPE_CGROUP_DEVICE as u32;
    pub const SKB: u32 = BPF_PROG_TYPE_CGROUP_SKB as u32;
    pub const SOCK_OPS: u32 = BPF_PROG_TYPE_SOCK_OPS as u32;
    pub const SOCKOPT: u32 = BPF_PROG_TYPE_CGROUP_SOCKOPT as u32;
    pub const SYSCTL: u32 = BPF_PROG_TYPE_CGROUP_SYSCTL as u32;
}

/// The program type that runs at a cgroup hook.
pub fn prog_type_for(hook: &str) -> u32 {
    match hook {
        "post_bind4" | "post_bind6" | "sock_create" | "sock_release" => prog_type::SOCK,
        "device" => prog_type::DEVICE,
        "ingress" | "egress" => prog_type::SKB,
        "sock_ops" => prog_type::SOCK_OPS,
        "getsockopt" | "setsockopt" => prog_type::SOCKOPT,
        "sysctl" => prog_type::SYSCTL,
        _ => prog_type::SOCK_ADDR,
    }
}

/// Ids of every BPF program loaded on the node.
pub fn loaded_program_ids() -> Vec<u32> {
    sys::ids(sys::Objects::Programs).collect::<Result<_, _>>().expect("BPF_PROG_GET_NEXT_ID")
}

/// Programs loaded now that were not when `before` was read. Only new ones
/// count: programs of earlier tests that were attached to since-removed
/// cgroups leave when the kernel releases those cgroups, asynchronously, so
/// `before` may shrink meanwhile.
pub fn programs_left_since(before: &[u32]) -> Vec<u32> {
    loaded_program_ids().into_iter().filter(|id| !before.contains(id)).collect()
}

/// A loaded allow-all program (`r0 = 1; exit`): it never changes what a
/// socket does, so attaching it anywhere, even the real root, is harmless.
/// Unloaded when dropped (unless still attached somewhere).
pub struct Prog {
    pub fd: OwnedFd,
    pub id: u32,
    pub name: String,
    pub hook: AttachType,
}

impl Prog {
    /// Loads a program for `hook` named `name`; names longer than 15 bytes get
    /// BTF so the full name is recoverable, as Cilium's are.
    pub fn load(name: &str, hook: &str) -> Prog {
        let at = AttachType::from_name(hook).unwrap_or_else(|| panic!("unknown hook {hook}"));
        // mov64 r0, 1 ; exit
        Prog::load_insns(name, prog_type_for(hook), at, &[0xb7u64 | (1u64 << 32), 0x95])
    }

    /// Like `load`, with `pad` bytes of unused strings in its BTF (anyone
    /// who loads a program chooses its BTF; the kernel takes up to 16 MiB).
    pub fn load_padded(name: &str, hook: &str, pad: usize) -> Prog {
        let at = AttachType::from_name(hook).unwrap_or_else(|| panic!("unknown hook {hook}"));
        Prog::load_with(name, prog_type_for(hook), at, &[0xb7u64 | (1u64 << 32), 0x95], pad)
    }

    /// Loads `insns` as a program of `prog_type` for `hook`, named as `load`
    /// names them.
    pub fn load_insns(name: &str, prog_type: u32, at: AttachType, insns: &[u64]) -> Prog {
        Prog::load_with(name, prog_type, at, insns, 0)
    }

    /// A tc program (SCHED_CLS) named `name` that passes every packet
    /// (`TC_ACT_OK`), for an interface's tc or tcx hooks.
    pub fn load_sched_cls(name: &str) -> Prog {
        let any = AttachType::from_name("sock_ops").expect("sock_ops");
        // mov64 r0, 0 ; exit
        Prog::load_with(name, aya_obj::generated::bpf_prog_type::BPF_PROG_TYPE_SCHED_CLS as u32, any, &[0xb7, 0x95], 0)
    }

    /// An XDP program named `name` that passes every packet (`XDP_PASS`).
    pub fn load_xdp_pass(name: &str) -> Prog {
        let any = AttachType::from_name("sock_ops").expect("sock_ops");
        // mov64 r0, XDP_PASS (2) ; exit
        let pass = 0xb7u64 | (2u64 << 32);
        Prog::load_with(name, aya_obj::generated::bpf_prog_type::BPF_PROG_TYPE_XDP as u32, any, &[pass, 0x95], 0)
    }

    /// An allow-all program of a type that attaches to no cgroup (sk_msg,
    /// whose load checks no expected attach type); its `hook` field means
    /// nothing.
    pub fn load_detached_type(name: &str, prog_type: u32) -> Prog {
        let any = AttachType::from_name("sock_ops").expect("sock_ops");
        Prog::load_with(name, prog_type, any, &[0xb7u64 | (1u64 << 32), 0x95], 0)
    }

    fn load_with(name: &str, prog_type: u32, at: AttachType, insns: &[u64], pad: usize) -> Prog {
        let hook = at.name();
        let btf_fd;
        let mut func_info = Vec::new();
        if !name.is_empty() {
            let mut btf = Btf::new();
            let int = btf.add_string("int");
            let int_id = btf.add_type(BtfType::Int(Int::new(int, 4, IntEncoding::Signed, 0)));
            let proto = btf.add_type(BtfType::FuncProto(FuncProto::new(Vec::new(), int_id)));
            let fname = btf.add_string(name);
            let func = btf.add_type(BtfType::Func(Func::new(fname, proto, FuncLinkage::Static)));
            if pad > 0 {
                btf.add_string(&"p".repeat(pad));
            }
            btf_fd = Some(sys::btf_load(&btf.to_bytes()).expect("BPF_BTF_LOAD"));
            func_info.push(bpf_func_info { insn_off: 0, type_id: func });
        } else {
            btf_fd = None;
        }
        let fd = sys::prog_load(&sys::ProgLoad {
            prog_type,
            expected_attach_type: at.kernel_value(),
            attach_btf_id: 0,
            name,
            license: c"GPL",
            insns,
            btf: btf_fd.as_ref().map(|fd| sys::ProgBtf { fd: fd.as_fd(), func_info: &func_info, line_info: &[] }),
        })
        .unwrap_or_else(|e| panic!("load {name} for {hook}: {e}"));
        let id = sys::prog_info(fd.as_fd()).expect("prog info").id;
        Prog { fd, id, name: name.to_owned(), hook: at }
    }
}

/// A legacy `BPF_PROG_ATTACH` attachment, detached on drop (it would
/// otherwise outlive the test).
pub struct Attached {
    cgroup: OwnedFd,
    prog: OwnedFd,
    hook: AttachType,
    pub prog_id: u32,
}

pub const ALLOW_MULTI: u32 = aya_obj::generated::BPF_F_ALLOW_MULTI;
pub const ALLOW_OVERRIDE: u32 = aya_obj::generated::BPF_F_ALLOW_OVERRIDE;

impl Attached {
    pub fn new(cgroup: &Path, prog: &Prog, flags: u32) -> Attached {
        Self::new_fd(open_dir(cgroup), prog, flags)
    }

    pub fn new_fd(cgroup: OwnedFd, prog: &Prog, flags: u32) -> Attached {
        sys::prog_attach(cgroup.as_fd(), prog.fd.as_fd(), prog.hook.kernel_value(), flags)
            .unwrap_or_else(|e| panic!("attach {} to {:?}: {e}", prog.name, cgroup));
        Attached { cgroup, prog: prog.fd.try_clone().expect("dup prog fd"), hook: prog.hook, prog_id: prog.id }
    }
}

impl Drop for Attached {
    fn drop(&mut self) {
        // ENOENT: the cgroup is already gone, and its programs with it.
        if let Err(e) = sys::prog_detach(self.cgroup.as_fd(), self.prog.as_fd(), self.hook.kernel_value())
            && e.errno() != Some(libc::ENOENT)
        {
            eprintln!("WARNING: detach prog {}: {e}", self.prog_id);
        }
    }
}

/// A cgroup bpf_link; it ends when this fd (and any pin) is gone.
pub struct Link {
    pub fd: OwnedFd,
    pub id: u32,
}

impl Link {
    pub fn new(cgroup: &Path, prog: &Prog) -> Link {
        let cg = open_dir(cgroup);
        let fd = sys::cgroup_link_create(cg.as_fd(), prog.fd.as_fd(), prog.hook.kernel_value())
            .unwrap_or_else(|e| panic!("link {} to {}: {e}", prog.name, cgroup.display()));
        let id = sys::cgroup_link_info(fd.as_fd()).expect("link info").expect("a cgroup link").link_id;
        Link { fd, id }
    }
}

/// Makes `link` run `prog` instead (`BPF_LINK_UPDATE`).
pub fn link_update(link: &Link, prog: &Prog) {
    sys::link_update(link.fd.as_fd(), prog.fd.as_fd()).unwrap_or_else(|e| panic!("update link {}: {e}", link.id));
}

/// A private bpffs mount for pins, unmounted (and its pins with it) on drop.
pub struct BpfFs {
    pub dir: tempfile::TempDir,
}

impl BpfFs {
    pub fn new() -> BpfFs {
        let dir = tempfile::tempdir().expect("tempdir");
        nix::mount::mount(Some("bpf"), dir.path(), Some("bpf"), nix::mount::MsFlags::empty(), None::<&str>)
            .expect("mount bpffs");
        BpfFs { dir }
    }

    pub fn pin(&self, name: &str, fd: BorrowedFd<'_>) -> PathBuf {
        let p = self.dir.path().join(name);
        let c = CString::new(p.as_os_str().as_encoded_bytes()).expect("path");
        sys::obj_pin(fd, &c).expect("BPF_OBJ_PIN");
        p
    }
}

impl Default for BpfFs {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for BpfFs {
    fn drop(&mut self) {
        if let Ok(entries) = fs::read_dir(self.dir.path()) {
            for e in entries.flatten() {
                let _ = fs::remove_file(e.path());
            }
        }
        let _ = nix::mount::umount2(self.dir.path(), nix::mount::MntFlags::MNT_DETACH);
    }
}

/// The ten programs Cilium attaches for socket LB, with their full names.
pub const CILIUM_SOCKET_LB: [(&str, &str); 10] = [
    ("cil_sock4_connect", "connect4"),
    ("cil_sock6_connect", "connect6"),
    ("cil_sock4_sendmsg", "sendmsg4"),
    ("cil_sock6_sendmsg", "sendmsg6"),
    ("cil_sock4_recvmsg", "recvmsg4"),
    ("cil_sock6_recvmsg", "recvmsg6"),
    ("cil_sock4_getpeername", "getpeername4"),
    ("cil_sock6_getpeername", "getpeername6"),
    ("cil_sock4_post_bind", "post_bind4"),
    ("cil_sock6_post_bind", "post_bind6"),
];

pub fn load_cilium_socket_lb() -> Vec<Prog> {
    CILIUM_SOCKET_LB.iter().map(|(n, h)| Prog::load(n, h)).collect()
}

/// Detaches every program attached with `BPF_PROG_ATTACH` to `cgroup`, on
/// every hook: what a stand-in CNI attached that way leaves behind when it
/// exits. Links are not touched (they end with their holder).
pub fn detach_all(cgroup: &Path) {
    let Ok(cg) = fs::File::open(cgroup) else { return };
    for hook in AttachType::all() {
        let Ok(q) = sys::prog_query(cg.as_fd(), hook.kernel_value(), false) else { continue };
        for id in q.prog_ids {
            if let Ok(prog) = sys::prog_fd_by_id(id) {
                let _ = sys::prog_detach(cg.as_fd(), prog.as_fd(), hook.kernel_value());
            }
        }
    }
}

/// `detach_all(path)` on drop.
pub struct DetachAll(pub PathBuf);

impl Drop for DetachAll {
    fn drop(&mut self) {
        detach_all(&self.0);
    }
}
