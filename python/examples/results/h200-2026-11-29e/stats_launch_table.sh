# bench_kernels' stats-launch table only, for the kernel files of .scratch/$1
cp ../.scratch/$1/*.py mxscope_bridge/
python3 examples/bench_kernels.py 2>&1 | sed -n '/stats launch/,/^∇Y/p' | grep '^| (' | sed "s/^/$1 /"
