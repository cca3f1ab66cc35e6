#!/bin/sh
# Seeds fuzz/corpus/<target>/ from the repository's fixtures (corpus/ is
# gitignored; libFuzzer grows it in place). Run from anywhere:
#   fuzz/seed.sh            # all targets
#   fuzz/seed.sh compile_policy
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
targets=${*:-parse_policy_yaml compile_policy inventory_load lsp_messages baseline_parse parse_flow_line}

seed_yaml() {
    # $1 = target; copies every fixture policy file and fuzz/seeds/ (inputs
    # that once were slow or broke something), named after its path so
    # reruns overwrite instead of duplicating.
    dir="$here/corpus/$1"
    mkdir -p "$dir"
    find "$root/fixtures/examples" "$root/fixtures/invalid" "$root/fixtures/policy-tests" \
        "$here/seeds" -type f \( -name '*.yaml' -o -name '*.yml' \) | while read -r file; do
        name=$(printf '%s' "${file#"$root"/}" | tr '/' '_')
        cp "$file" "$dir/$name"
    done
}

seed_inventory() {
    # Every inventory source porin reads: porin YAML and PolicyTest files,
    # Kubernetes manifests, Cilium agent dumps (JSON).
    dir="$here/corpus/$1"
    mkdir -p "$dir"
    find "$root/fixtures/inventories" "$root/fixtures/policy-tests" \
        -type f \( -name '*.yaml' -o -name '*.yml' -o -name '*.json' \) | while read -r file; do
        name=$(printf '%s' "${file#"$root"/}" | tr '/' '_')
        cp "$file" "$dir/$name"
    done
}

for target in $targets; do
    case "$target" in
    parse_policy_yaml | compile_policy) seed_yaml "$target" ;;
    inventory_load) seed_inventory "$target" ;;
    # LSP sessions, one bare JSON message a line (fuzz/seeds/*.lsp).
    lsp_messages) mkdir -p "$here/corpus/$target" && cp "$here"/seeds/*.lsp "$here/corpus/$target/" ;;
    # Baseline files (fuzz/seeds/*.baseline.json, as --write-baseline writes them).
    baseline_parse) mkdir -p "$here/corpus/$target" && cp "$here"/seeds/*.baseline.json "$here/corpus/$target/" ;;
    # Hubble flow files (fixtures/flows: -o json and -o jsonpb lines).
    parse_flow_line) mkdir -p "$here/corpus/$target" && find "$root/fixtures/flows" -type f \( -name '*.json' -o -name '*.jsonpb' \) -exec cp {} "$here/corpus/$target/" \; ;;
    # Structured (Arbitrary) targets start from libFuzzer's own inputs:
    # fixture text would not decode into their input types meaningfully.
    emit_roundtrip | insn_roundtrip | reparse_edit) mkdir -p "$here/corpus/$target" ;;
    *) echo "seed.sh: unknown target \`$target\`" >&2; exit 2 ;;
    esac
    echo "seeded $here/corpus/$target: $(ls "$here/corpus/$target" | wc -l) files"
done
