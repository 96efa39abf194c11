#!/usr/bin/env bash
# librcoll_mpi.so exports the functions of include/rcoll_mpi.h and MPI_ wrappers, nothing else
# (the util copy inside it stays local).
set -u
src=$1
lib=$2
want=$(grep -oE '^[a-z_ ]+[ *]rcoll_[a-z_]+\(' "$src/include/rcoll_mpi.h" | grep -oE 'rcoll_[a-z_]+\(' | tr -d '(' | sort -u)
have=$(nm -D --defined-only "$lib" | awk '$2 == "T" {print $3}' | sed 's/@.*//' | sort -u)
extra=$(comm -13 <(echo "$want") <(echo "$have") | grep -v '^MPI_[A-Z][a-z_]*$')
missing=$(comm -23 <(echo "$want") <(echo "$have"))
nmpi=$(echo "$have" | grep -c '^MPI_')
fail=0
[ -n "$extra" ] && { echo "exported but neither in rcoll_mpi.h nor an MPI_ wrapper: $extra"; fail=1; }
[ -n "$missing" ] && { echo "declared in rcoll_mpi.h but not exported: $missing"; fail=1; }
echo "$have" | grep -qx MPI_Allreduce || { echo "MPI_Allreduce not exported"; fail=1; }
if [ $fail = 0 ]; then echo "1 passed, 0 failed ($(echo "$want" | wc -w) functions, $nmpi MPI_ wrappers)"; else echo "0 passed, 1 failed"; fi
exit $fail
