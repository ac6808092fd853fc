# The hidden-pool scanner on a fixture whose findings are known.
execute_process(COMMAND ${SCAN} ${ROOT} ${ROOT}/scan_fixture/allow.txt scan_fixture
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
message("${out}${err}")
if(NOT rc EQUAL 1)
  message(FATAL_ERROR "expected exit status 1 (hidden pools found), got ${rc}")
endif()
set(expected
  "allowed  scan_fixture/fake_kernel.c:20: calloc in fake_create (kernel state at create)"
  "HIDDEN   scan_fixture/fake_kernel.c:29: malloc in fake_compute"
  "HIDDEN   scan_fixture/fake_kernel.c:6: malloc in (file scope)"
  "HIDDEN   scan_fixture/fake_kernel.cu:9: new in fake_launch"
  "HIDDEN   scan_fixture/fake_kernel.cu:10: cudaMallocAsync in fake_launch"
  "note: stale allow-list entry 'scan_fixture/gone.c * malloc' allows nothing"
  "2 files scanned, 5 allocator calls, 1 allowed, 4 hidden")
foreach(line IN LISTS expected)
  string(FIND "${out}" "${line}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "scanner output lacks: ${line}")
  endif()
endforeach()
