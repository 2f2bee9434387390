// plugin_stress fuzz: memory behind huge lengths (see fuzz.h).
#include <sys/mman.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <sstream>

#include "fuzz/fuzz.h"

namespace stress::fuzz
{
//! A read-only anonymous mapping (zero pages, no memory committed) large enough to back INT32_MAX elements
//! of any field type, so that even the largest lengths are backed by readable memory.
HugeRegion const& hugeRegion()
{
    static HugeRegion const region = []
    {
        HugeRegion r;
        for (size_t gib : {160, 17, 2})
        {
            size_t const bytes = gib << 30;
            void* p = mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
            if (p != MAP_FAILED)
            {
                r.base = p;
                r.bytes = bytes;
                break;
            }
        }
        return r;
    }();
    return region;
}

//! Bytes per element a reader could assume for a field type: the harness's sizes for the types it knows,
//! 8 (the widest scalar) for kUNKNOWN and values outside the enum, so a fuzzed buffer is never too short.
size_t backingSize(int32_t type)
{
    bool const known = type >= static_cast<int32_t>(PluginFieldType::kFLOAT16) &&
                       type <= static_cast<int32_t>(PluginFieldType::kFP4) &&
                       type != static_cast<int32_t>(PluginFieldType::kUNKNOWN);
    return known ? harness::fieldTypeSize(static_cast<PluginFieldType>(type)) : 8;
}

char const* typeLabel(int32_t type)
{
    static char const* const names[] = {"f16",  "f32",  "f64",  "i8",  "i16", "i32",  "char",
                                        "dims", "unkn", "bf16", "i64", "fp8", "int4", "fp4"};
    return type >= 0 && type < 14 ? names[type] : "invalid";
}

}  // namespace stress::fuzz
