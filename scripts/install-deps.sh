#!/usr/bin/env bash
# install-deps.sh - installs what building and testing smx needs on Debian 12, and nothing when it is there.
#   scripts/install-deps.sh build   compilers, CMake, spdlog/fmt, Catch2 (enough for smx-bench and ctest)
#   scripts/install-deps.sh test    also clang + libFuzzer, pkg-config, pip, ninja, and numpy/pytest/ml_dtypes/torch
#                                   (torch from PyPI, ~1 min here: the tests build smx's torch extension with
#                                   g++ and ninja on first use)
# apt-get update runs only when a package is missing. Needs root, or sudo.
set -euo pipefail

profile=${1:-test}
apt_packages=(cmake make g++ binutils catch2 libspdlog-dev libfmt-dev)
python_modules=()
case "$profile" in
    build) ;;
    test)
        apt_packages+=(clang libclang-rt-14-dev pkg-config python3 python3-pip ninja-build)
        python_modules=(numpy pytest ml_dtypes torch)
        ;;
    *) echo "usage: $0 [build|test]" >&2; exit 2 ;;
esac

as_root=()
if [ "$(id -u)" -ne 0 ]; then as_root=(sudo); fi

missing=()
for package in "${apt_packages[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "install-deps: apt-get install ${missing[*]}"
    "${as_root[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ ${#python_modules[@]} -gt 0 ]; then
    missing_modules=()
    for module in "${python_modules[@]}"; do
        python3 -c "import $module" 2>/dev/null || missing_modules+=("$module")
    done
    if [ ${#missing_modules[@]} -gt 0 ]; then
        echo "install-deps: pip install ${missing_modules[*]}"
        pip_log=$(mktemp)
        trap 'rm -f "$pip_log"' EXIT
        # Debian's python3 is "externally managed" (PEP 668): only then does pip need the override.
        if ! python3 -m pip install -q "${missing_modules[@]}" 2>"$pip_log"; then
            if grep -q externally-managed-environment "$pip_log"; then
                python3 -m pip install -q --break-system-packages "${missing_modules[@]}"
            else
                cat "$pip_log" >&2
                exit 1
            fi
        fi
    fi
fi
