# Type stub for a generated loop module (compiled, private; gen_loops.py writes the
# source from optable.py): the addresses of its C inner loops, which
# ember._core.elementwise reads into its dispatch tables.
def loop_addresses() -> list[tuple[str, int, int]]: ...    # (op name, dtype code, address)
def cast_addresses() -> list[tuple[int, int, int]]: ...    # (source code, target code, address)
