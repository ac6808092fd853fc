# onyx-bench-governor (tools/bench_governor.c). Included from tools/CMakeLists.txt.
add_executable(onyx-bench-governor ${CMAKE_CURRENT_LIST_DIR}/bench_governor.c)
target_link_libraries(onyx-bench-governor PRIVATE onyx_governor Threads::Threads)
