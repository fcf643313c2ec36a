#!/usr/bin/env bash
# Byte identity of the `monomorph match` / `peaks` outputs between two binaries (OLD, NEW) over a
# matrix of CLI paths: one process, --devices 0,1 on the CPU, mpirun -n 1/2/3, --target-list
# (whole and split items, --peaks), tiled and untiled, filters, --score-stats,
# --background-correction, restrictions, MCC, --pad-edges. Every output file is compared with
# cmp; run.json / list.json are compared after dropping what measures time or memory (and the
# binary's own path in "command").
#   tests/identity/run.sh OLD_BIN NEW_BIN [WORKDIR]
# Needs python3 and, for the MPI cases, mpirun and both binaries built with --features mpi.
set -uo pipefail
OLD=$(realpath "$1"); NEW=$(realpath "$2"); W=${3:-/tmp/monomorph-identity}
HERE=$(cd "$(dirname "$0")" && pwd)
rm -rf "$W"; mkdir -p "$W/run" "$W/old" "$W/new"
IN="$W/in"
python3 "$HERE/make_inputs.py" "$IN" || exit 1
export RAYON_NUM_THREADS=2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_plm_rsh_agent=false OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_hwloc_base_binding_policy=none
fail=0; files=0; cases=0

run_one() { # BIN RANKS ARGS...
  local bin=$1 ranks=$2; shift 2
  if [ "$ranks" = 0 ]; then "$bin" "$@" -q
  else RAYON_NUM_THREADS=1 mpirun -n "$ranks" -q --timeout 300 "$bin" "$@" -q; fi
}

case_() { # NAME RANKS ARGS... (output folder: o)
  local name=$1 ranks=$2; shift 2
  cases=$((cases + 1))
  for which in old new; do
    local bin=$OLD; [ $which = new ] && bin=$NEW
    (cd "$W/run" && rm -rf o && { [[ $name != peaks* ]] || mkdir o; } && run_one "$bin" "$ranks" "$@" >"$W/$which/$name.log" 2>&1; echo $? >"$W/$which/$name.rc"
     [ -e o ] && mv o "$W/$which/$name")
  done
  local ro rn; ro=$(cat "$W/old/$name.rc"); rn=$(cat "$W/new/$name.rc")
  if [ "$ro" != "$rn" ] || [ "$ro" != 0 ]; then
    echo "FAIL $name: exit $ro (old) vs $rn (new)"; sed 's/^/  old: /' "$W/old/$name.log" | tail -3
    sed 's/^/  new: /' "$W/new/$name.log" | tail -3; fail=1; return
  fi
  local lo ln; lo=$(cd "$W/old/$name" && find . -type f | sort); ln=$(cd "$W/new/$name" && find . -type f | sort)
  if [ "$lo" != "$ln" ]; then echo "FAIL $name: file lists differ"; diff <(echo "$lo") <(echo "$ln") | head; fail=1; return; fi
  local bad=0 n=0 list=0
  case "$name" in *list*) list=1 ;; esac
  for f in $lo; do
    n=$((n + 1))
    case "$f" in
      *.json) LIST=$list python3 "$HERE/norm_json.py" "$W/old/$name/$f" "$W/new/$name/$f" || { echo "  differs: $f"; bad=1; } ;;
      *) cmp -s "$W/old/$name/$f" "$W/new/$name/$f" || { echo "  differs: $f"; bad=1; } ;;
    esac
  done
  files=$((files + n))
  if [ $bad = 1 ]; then echo "FAIL $name"; fail=1; else echo "ok   $name ($n files: $(echo $lo | tr '\n' ' '))"; fi
}

refused() { # NAME RANKS ARGS...: both binaries exit alike (non-zero) with the same messages
  local name=$1 ranks=$2; shift 2
  cases=$((cases + 1))
  for which in old new; do
    local bin=$OLD; [ $which = new ] && bin=$NEW
    (cd "$W/run" && rm -rf o && run_one "$bin" "$ranks" "$@" >"$W/$which/$name.log" 2>&1; echo $? >"$W/$which/$name.rc"; rm -rf o)
  done
  local ro rn; ro=$(cat "$W/old/$name.rc"); rn=$(cat "$W/new/$name.rc")
  # The same lines (a binary before the MPI refusal fix printed rank 1's copy at random), and
  # exactly one error line from the new one.
  local lines; lines=$(grep -c '^error:' "$W/new/$name.log")
  if [ "$ro" != "$rn" ] || [ "$ro" = 0 ] || [ "$lines" != 1 ] \
    || ! cmp -s <(sort -u "$W/old/$name.log") <(sort -u "$W/new/$name.log"); then
    echo "FAIL $name: exit $ro (old) vs $rn (new), $lines error line(s)"
    diff "$W/old/$name.log" "$W/new/$name.log" | head -6; fail=1
  else echo "ok   $name (exit $ro, same messages)"; fi
}

T="-m $IN/target.mrc"; P="-i $IN/template.npy --template-mask $IN/template_mask.npy"
F="--tilt-angles 50,45 --lowpass 25 --highpass 120 --defocus 20000"
# One process.
case_ flc 0 match $T $P -s flc -a 40 -o o --png
case_ flc_stats_tiled 0 match $T $P -s flc -a 40 -o o --score-stats --memory-limit 3M
case_ sphere_filters 0 match $T $P -a 40 -o o $F --score-stats
case_ cc_pad_filters_tiled 0 match $T $P -s cc -a 45 -o o $F --pad-edges --memory-limit 3M
case_ background 0 match $T $P -s flc -a 45 -o o --background-correction phase-scrambling --score-stats
case_ background_tiled 0 match -m $IN/target.npy $P -a 45 -o o --background-correction phase-scrambling --memory-limit 3M
case_ restricted 0 match $T $P -s flc -a 45 -o o --search-z 8:30 --search-x 4: --score-stats
case_ restricted_tiled 0 match $T $P -a 45 -o o --scheduling-mask $IN/scheduling_mask.npy --memory-limit 3M --score-stats
case_ npy_filters_background 0 match -m $IN/target.npy $P -a 45 -o o $F --background-correction phase-scrambling --score-stats
case_ mcc 0 match $T $P -s mcc --target-mask $IN/target_mask.npy -a 50 -o o
# --devices 0,1 on the CPU.
case_ dev_flc 0 match $T $P -s flc -a 40 -o o --devices 0,1 --backend cpu --png
case_ dev_filters_tiled 0 match $T $P -a 40 -o o $F --devices 0,1 --backend cpu --memory-limit 3M --score-stats
case_ dev_background 0 match $T $P -a 45 -o o --devices 1,0 --backend cpu --background-correction phase-scrambling --score-stats
case_ dev_restricted 0 match $T $P -a 45 -o o --devices 0,1 --backend cpu --scheduling-mask $IN/scheduling_mask.npy --search-y 3:38
case_ dev_npy_filters 0 match -m $IN/target.npy $P -a 45 -o o $F --devices 0,1 --backend cpu --background-correction phase-scrambling
# MPI ranks.
for n in 1 2 3; do
  case_ mpi${n}_flc $n match $T $P -s flc -a 40 -o o --png
  case_ mpi${n}_stats_tiled $n match $T $P -a 40 -o o $F --score-stats --memory-limit 3M
  case_ mpi${n}_background $n match $T $P -a 45 -o o --background-correction phase-scrambling --search-z 6:34
done
case_ mpi2_npy_filters 2 match -m $IN/target.npy $P -a 45 -o o $F --background-correction phase-scrambling --score-stats
case_ mpi2_mcc 2 match $T $P -s mcc --target-mask $IN/target_mask.npy -a 50 -o o
# Lists: one process, --devices, ranks (2 targets on 3 ranks: split items; 1 target on 3).
L="--target-list $IN/list.txt"; PK="--peaks --min-distance 4 --num-peaks 5"
case_ list 0 match $L $P -a 40 -o o $PK --score-stats
case_ list_devices 0 match $L $P -a 40 -o o $PK --devices 0,1 --backend cpu
case_ list_star_fp 0 match --target-list $IN/list.star $P -a 45 -o o --peaks --false-positives 1 --caller maxfilter
for n in 1 2 3; do
  case_ mpi${n}_list $n match $L $P -a 40 -o o $PK --score-stats
done
case_ mpi3_list_one 3 match --target-list $IN/one.txt $P -a 40 -o o $PK --background-correction phase-scrambling --memory-limit 3M
case_ mpi2_list_star 2 match --target-list $IN/list.star $P -a 45 -o o $PK $F --sampling-rate 6.8
# peaks on a match folder (the one-process flc case's).
mkdir -p "$W/run/m"; cp -r "$W/old/flc/." "$W/run/m/"
case_ peaks_fp 0 peaks --scores m/scores.npy --match-run m --false-positives 1 --min-distance 4 --out o/peaks.star
case_ peaks_csv 0 peaks --scores m/scores.npy --rotation-index m/rotation_index.npy --rotations m/rotations.npy --min-distance 3 --num-peaks 20 --threshold-rel 0.2 --out o/peaks.csv
# Refusals: the same exit status and messages.
refused err_peaks_one 0 match $T $P -a 40 -o o --peaks
refused err_mcc_no_mask 0 match $T $P -s mcc -a 40 -o o
refused err_devices 0 match $T $P -a 40 -o o --devices 0,0 --backend cpu
refused err_missing 0 match -m $IN/nope.mrc $P -a 40 -o o
refused err_list_missing 0 match --target-list $IN/nope.txt $P -a 40 -o o
refused err_mpi2_peaks_one 2 match $T $P -a 40 -o o --peaks
refused err_list_pytom 0 match $L $P -a 40 -o o --peaks --caller pytom
case_ peaks_pytom 0 peaks --scores m/scores.npy --match-run m --caller pytom --particle-diameter 40 --sampling-rate 10 --num-peaks 5 --out o/peaks.star
refused err_peaks_pytom_flag 0 peaks --scores m/scores.npy --particle-diameter 40 --out o/peaks.star
echo "== $cases cases, $files files compared"
[ $fail = 0 ] && echo "IDENTICAL" || { echo "DIFFERENCES"; exit 1; }
