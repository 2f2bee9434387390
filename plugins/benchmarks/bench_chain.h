#pragma once

#include <string>

#include "bench_support.h"

namespace tpk_bench
{
//! Captures the chain `spec` (plugin#fields#io#sources per step, separated by '|') one forward per graph and
//! times it and its launch floor; `json` gets the timings (tpk_bench_chain).
void chain(std::string const& spec, int64_t repetitions, Options const& options, std::string& json);
}  // namespace tpk_bench
