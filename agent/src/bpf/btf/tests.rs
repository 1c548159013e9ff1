use super::raw::Raw;
use super::*;
use aya_obj::btf::{Btf, BtfEnum, BtfParam, BtfType, Enum, Func, FuncLinkage, FuncProto, Int, IntEncoding};

fn blob() -> (Vec<u8>, u32, u32) {
    let mut btf = Btf::new();
    let int = btf.add_string("int");
    let int_id = btf.add_type(BtfType::Int(Int::new(int, 4, IntEncoding::Signed, 0)));
    let ctx = btf.add_string("ctx");
    // An enum with members shifts later types by its trailing records.
    let ename = btf.add_string("verdict");
    let (a, b) = (btf.add_string("DROP"), btf.add_string("PASS"));
    let _ = btf.add_type(BtfType::Enum(Enum::new(ename, false, vec![BtfEnum::new(a, 0), BtfEnum::new(b, 1)])));
    let proto =
        btf.add_type(BtfType::FuncProto(FuncProto::new(vec![BtfParam { name_offset: ctx, btf_type: int_id }], int_id)));
    let fname = btf.add_string("cil_sock4_connect");
    let func = btf.add_type(BtfType::Func(Func::new(fname, proto, FuncLinkage::Global)));
    (btf.to_bytes(), func, proto)
}

#[test]
fn func_name_is_found_past_variable_length_records() {
    let (data, func, _) = blob();
    assert_eq!(type_name(&data, func).as_deref(), Some("cil_sock4_connect"));
}

#[test]
fn a_name_is_found_from_prefixes_of_the_blob() {
    let (data, func, _) = blob();
    let end = types_end(&data).unwrap();
    let at = name_offset(&data[..end], func).expect("the types are all that is needed");
    assert_eq!(name_at(&data, at).as_deref(), type_name(&data, func).as_deref());
    assert!(name_offset(&data[..end - 1], func).is_none(), "a prefix too short says so");
    assert!(name_at(&data[..at + 2], at).is_none(), "a name cut short is no name");
}

#[test]
fn anonymous_and_missing_types_have_no_name() {
    let (data, func, proto) = blob();
    assert_eq!(type_name(&data, proto), None);
    assert_eq!(type_name(&data, func + 1), None);
    assert_eq!(type_name(&data, 0), None);
}

#[test]
fn garbage_is_not_btf() {
    assert_eq!(type_name(b"not btf at all, definitely not", 1), None);
    assert_eq!(type_name(&[], 1), None);
}

/// A little kernel: `struct kernfs_node` with its parent pointer in an
/// anonymous union, a typedef'd u8 array, a signed enum, a function.
fn kernel_blob(parent_name: &str) -> Vec<u8> {
    let mut b = Raw::new();
    let u8_id = b.ty("unsigned char", KIND_INT, 0, 1, &[8]);
    let u8_td = b.ty("u8", KIND_TYPEDEF, 0, u8_id, &[]);
    let u64_id = b.ty("long long unsigned int", KIND_INT, 0, 8, &[64]);
    let ptr = b.ty("", KIND_PTR, 0, u8_id, &[]);
    let flags = b.ty("", KIND_ARRAY, 0, 0, &[u8_td, u64_id, 38]);
    let anon = b.compound("", KIND_UNION, 8, &[(parent_name, ptr, 0)]);
    b.compound(
        "kernfs_node",
        KIND_STRUCT,
        72,
        &[("", anon, 0), ("name", ptr, 64), ("flags", flags, 128), ("id", u64_id, 512)],
    );
    let (inv, max) = (b.s("CGROUP_BPF_ATTACH_TYPE_INVALID"), b.s("MAX_CGROUP_BPF_ATTACH_TYPE"));
    b.ty("cgroup_bpf_attach_type", KIND_ENUM, 2, 4, &[inv, -1i32 as u32, max, 38]);
    b.ty("bpf_iter_cgroup", KIND_FUNC, 0, 0, &[]);
    b.bytes()
}

#[test]
fn member_offsets_are_found_through_anonymous_unions_and_renames() {
    for parent in ["__parent", "parent"] {
        let data = kernel_blob(parent);
        let types = Types::parse(&data).unwrap();
        assert_eq!(types.offset_of("kernfs_node", "__parent|parent").unwrap().0, 0, "{parent}");
        assert_eq!(types.offset_of("kernfs_node", "name").unwrap().0, 8);
        assert_eq!(types.offset_of("kernfs_node", "id").unwrap().0, 64);
        let (off, flags) = types.offset_of("kernfs_node", "flags").unwrap();
        assert_eq!((off, types.element_size(flags).unwrap()), (16, 1), "u8 through its typedef");
    }
}

#[test]
fn what_the_kernel_lacks_is_named() {
    let data = kernel_blob("__parent");
    let types = Types::parse(&data).unwrap();
    assert_eq!(
        types.offset_of("kernfs_node", "hash").unwrap_err(),
        BtfError::Missing("member hash of struct kernfs_node".into())
    );
    assert_eq!(types.offset_of("cgroup", "kn").unwrap_err(), BtfError::Missing("struct cgroup".into()));
    assert_eq!(types.enum_values("bpf_attach_type").unwrap_err(), BtfError::Missing("enum bpf_attach_type".into()));
    assert!(Types::parse(b"definitely not btf").is_err());
}

#[test]
fn an_indexed_parse_finds_what_a_scan_finds() {
    let data = kernel_blob("__parent");
    let plain = Types::parse(&data).unwrap();
    let indexed = Types::parse_indexed(&data, &["kernfs_node", "cgroup_bpf_attach_type", "bpf_iter_cgroup"]).unwrap();
    assert_eq!(indexed.named.len(), 3);
    assert_eq!(indexed.func_id("bpf_iter_cgroup"), plain.func_id("bpf_iter_cgroup"));
    assert_eq!(indexed.offset_of("kernfs_node", "id"), plain.offset_of("kernfs_node", "id"));
    assert_eq!(indexed.enum_values("cgroup_bpf_attach_type"), plain.enum_values("cgroup_bpf_attach_type"));
}

#[test]
fn enum_values_keep_their_sign_and_functions_their_id() {
    let data = kernel_blob("__parent");
    let types = Types::parse(&data).unwrap();
    let values = types.enum_values("cgroup_bpf_attach_type").unwrap();
    assert_eq!(values, vec![("CGROUP_BPF_ATTACH_TYPE_INVALID".into(), -1), ("MAX_CGROUP_BPF_ATTACH_TYPE".into(), 38)]);
    let id = types.func_id("bpf_iter_cgroup").unwrap();
    assert_eq!(type_name(&data, id).as_deref(), Some("bpf_iter_cgroup"));
}

#[test]
fn a_functions_arity_is_its_prototypes_parameter_count() {
    let (data, _, _) = blob();
    let types = Types::parse(&data).unwrap();
    assert_eq!(types.func_arity("cil_sock4_connect"), Ok(1));
    assert_eq!(types.func_arity("nope"), Err(BtfError::Missing("function nope".into())));
}
