# Runs onyx-run --plan --memory on the S = 4 workspace model and checks what it prints:
# the plan per node and region, the peaks, the admission verdict, the peaks the run
# reached (exactly the plan's) and, the session gone, no grant left.
execute_process(COMMAND ${ONYX_RUN} --config ${CONFIG} --plan --memory ${MODEL}
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
message("${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "onyx-run exited with ${rc}")
endif()
set(expected
  "workspace plan (11 regions; 4 of 4 nodes declare workspace):"
  "  #0 attn_0 (Scratch on wsmock): STEP 384 bytes, SESSION 128 bytes"
  "      q_bnsh                   STEP             128 bytes @0          align 64"
  "      out_bnsh                 STEP             128 bytes @128        align 64"
  "      scores                   STEP             128 bytes @256        align 256"
  "      kv_stage                 SESSION          128 bytes @0          align 256"
  "  #1 proj (Scratch on wsmock): STEP 256 bytes, SESSION 1000 bytes"
  "      acc                      STEP             256 bytes @0          align 4096"
  "  #3 norm (Scratch on wsmock): STEP 16 bytes, SESSION 0 bytes"
  "      unused                   STEP               0 bytes @16         align 64 (unused on this route)"
  "  wsmock (host): STEP peak 384 bytes (set by #0 attn_0, block align 4096), SESSION 1384 bytes (1384 to grant)"
  "  admission: fits"
  "workspace_session=1384 workspace_step=384"
  "\"grants\":[]")
foreach(line IN LISTS expected)
  string(FIND "${out}" "${line}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "onyx-run output lacks: ${line}")
  endif()
endforeach()
