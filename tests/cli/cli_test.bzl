"""cli_test: an end-to-end test of the command-line tools, a shell script given the tools it runs."""

# The tools a CLI test may name, by the word its arguments use.
_TOOLS = {
    "gmsynth": "//bench/synth:gmsynth",
    "gpuanalyze": "//analyze:gpuanalyze",
    "gpurec": "//recorder:gpurec",
    "gpureplay": "//replay:gpureplay",
    "mkfixture": "//tests/cli:analyze_mkfixture",
}

def cli_test(name, size, tools, inputs = [], raw_args = [], data = []):
    """sh_test NAME running NAME.sh with, as arguments, the paths of `tools` (in that order), then
    the files of each label of `inputs` ($(locations)), then `raw_args` as written (their files
    in `data`)."""
    native.sh_test(
        name = name,
        size = size,
        srcs = [name + ".sh"],
        args = ["$(location %s)" % _TOOLS[t] for t in tools] +
               ["$(locations %s)" % i for i in inputs] + raw_args,
        data = [_TOOLS[t] for t in tools] + inputs + data,
    )
