"""Compiler flags for the whole project, in one place."""

# Product code: C11, warnings are errors.
GM_COPTS = [
    "-std=c11",
    "-D_GNU_SOURCE",
    "-Wall",
    "-Wextra",
    "-Werror",
    "-Wshadow",
    "-Wstrict-prototypes",
    "-Wmissing-prototypes",
    "-Wno-unused-parameter",
    # option tables (gm_opt_t) leave their optional trailing fields (a value range) out
    "-Wno-missing-field-initializers",
    "-fno-strict-aliasing",
]

# googletest files (C++), next to the C they test.
GM_TEST_COPTS = [
    "-std=c++17",
    "-Wall",
    "-Wextra",
    "-Werror",
    "-Wno-missing-field-initializers",
]
