# ccache, where installed, for every C++/CUDA build of the repository (include before project()).
# `make test` compiles the plugins for two header sets and again in the copies its tests build (the scaffold
# tutorial, the README's fresh clone); ccache compiles each unchanged file once. base_dir is the folder holding
# the checkout and ../shared (the TensorRT headers), and the working directory is not hashed: a copy of the
# repository laid out the same way elsewhere (a fresh clone, a test's copy) hits the same entries.
find_program(TRT_PLUGIN_KIT_CCACHE ccache)
if(TRT_PLUGIN_KIT_CCACHE AND NOT CMAKE_CXX_COMPILER_LAUNCHER AND NOT CMAKE_CUDA_COMPILER_LAUNCHER)
  get_filename_component(_ccache_base "${CMAKE_CURRENT_LIST_DIR}/../.." ABSOLUTE)
  set(_ccache_env CCACHE_BASEDIR=${_ccache_base} CCACHE_NOHASHDIR=1)
  # C++: depend mode, the compiler's own -MD list instead of a second, preprocessing pass on a miss (a header
  # set's build from an empty cache: 58 -> 42 s on 2 cores). nvcc's units keep the default mode: depend mode
  # cannot store them.
  set(CMAKE_CXX_COMPILER_LAUNCHER ${CMAKE_COMMAND} -E env CCACHE_DEPEND=1 ${_ccache_env} ${TRT_PLUGIN_KIT_CCACHE})
  set(CMAKE_CUDA_COMPILER_LAUNCHER ${CMAKE_COMMAND} -E env ${_ccache_env} ${TRT_PLUGIN_KIT_CCACHE})
endif()
