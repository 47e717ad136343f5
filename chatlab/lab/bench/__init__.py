"""`chatlab bench`: chatlab's generation loop against the engines people would otherwise use."""
from chatlab.lab.bench.engines import BASELINE, ENGINES
from chatlab.lab.bench.report import add_ratios, format_table, plot, save_plot
from chatlab.lab.bench.runner import BenchConfig, bench_prompts, plan_groups, run_benchmark

__all__ = ["BASELINE", "ENGINES", "BenchConfig", "add_ratios", "bench_prompts", "format_table",
           "plan_groups", "plot", "run_benchmark", "save_plot"]
