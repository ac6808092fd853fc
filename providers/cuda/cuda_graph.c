/*
 * Capture and replay of the provider's stream (the onyx_graph_table) through CUDA
 * graphs.
 *
 * begin puts the stream into capture mode: from then on nothing queued on it runs, it
 * is recorded. end takes the recording back as a cudaGraph_t and, when the core keeps
 * it, instantiates it; the opaque graph the core holds is the cudaGraphExec_t, and the
 * template graph is destroyed at once (an executable graph does not need it). launch
 * queues one replay on the stream, in order with everything else queued there.
 *
 * Capture mode is cudaStreamCaptureModeThreadLocal: a call that is not capturable (a
 * stream or device synchronisation, a synchronous cudaMalloc) made by the capturing
 * thread fails and invalidates the capture, while other threads of the process — which
 * may run other sessions on other streams — are not affected. The mode has one
 * consequence for the caller: begin and end run on the same thread (CUDA refuses an
 * end from another one with cudaErrorStreamCaptureWrongThread).
 *
 * A capture the driver invalidated ends with cudaErrorStreamCaptureInvalidated and no
 * graph; the stream is out of capture mode and usable again. The runtime has also
 * recorded the failing call's error as the thread's last error: it is cleared here, so
 * the next kernel's launch check (cudaGetLastError) does not report it as its own.
 *
 * Graphs replay fixed device addresses: every buffer a captured kernel reads or writes
 * must stay allocated, at the same address, for as long as the graph is launched. That
 * is the core's bookkeeping; nothing here allocates or frees.
 */
#include <stdio.h>

#include "cuda_impl.h"

#if defined(CUDART_VERSION) && CUDART_VERSION < 12000
#error "the CUDA provider needs CUDA 12 or later (cudaGraphInstantiate with flags)"
#endif

/* Logs a CUDA failure of `what` and clears the thread's last error (none of the
 * failures here is sticky; a sticky one stays whatever is done). */
static onyx_status graph_fail(const onyx__cuda_provider *p, const char *what, cudaError_t e) {
  onyx__cuda_log_error(p, what, e);
  (void)cudaGetLastError();
  return e == cudaErrorMemoryAllocation ? ONYX_STATUS_OUT_OF_MEMORY : ONYX_STATUS_PROVIDER_ERROR;
}

static onyx_status cuda_graph_begin(void *state) {
  onyx__cuda_provider *p = state;
  if (p == NULL) return ONYX_STATUS_INVALID_ARGUMENT;
  if (!p->ready) return ONYX_STATUS_DEVICE_UNAVAILABLE;
  cudaError_t e = onyx__cuda_use_device(p);
  if (e == cudaSuccess) e = cudaStreamBeginCapture(p->stream, cudaStreamCaptureModeThreadLocal);
  if (e != cudaSuccess) return graph_fail(p, "cudaStreamBeginCapture", e);
  return ONYX_STATUS_OK;
}

static onyx_status cuda_graph_end(void *state, bool keep, void **out_graph) {
  onyx__cuda_provider *p = state;
  if (p == NULL) return ONYX_STATUS_INVALID_ARGUMENT;
  if (!p->ready) return ONYX_STATUS_DEVICE_UNAVAILABLE;
  cudaError_t e = onyx__cuda_use_device(p);
  if (e != cudaSuccess) return graph_fail(p, "cudaSetDevice before cudaStreamEndCapture", e);
  cudaGraph_t graph = NULL;
  e = cudaStreamEndCapture(p->stream, &graph);
  if (e != cudaSuccess) {
    /* cudaErrorStreamCaptureInvalidated: a call made while capturing was not
     * capturable (the call itself failed then, with its own error). The stream has
     * left capture mode; nothing was recorded that could be kept. */
    if (graph != NULL) (void)cudaGraphDestroy(graph);
    return graph_fail(p,
                      e == cudaErrorStreamCaptureInvalidated
                          ? "stream capture (invalidated by a call that cannot be captured)"
                          : "cudaStreamEndCapture",
                      e);
  }
  if (!keep || out_graph == NULL) {
    /* Discarded: the recorded work never runs. (keep without a place to put the graph
     * is a caller's mistake; the capture still ends, so the stream is not left
     * recording.) */
    if (graph != NULL) (void)cudaGraphDestroy(graph);
    if (!keep && out_graph != NULL) *out_graph = NULL;
    return keep ? ONYX_STATUS_INVALID_ARGUMENT : ONYX_STATUS_OK;
  }
  if (graph == NULL) return graph_fail(p, "cudaStreamEndCapture (no graph)", cudaErrorUnknown);
  cudaGraphExec_t exec = NULL;
  e = cudaGraphInstantiate(&exec, graph, 0);
  (void)cudaGraphDestroy(graph); /* the executable graph does not need its template */
  if (e != cudaSuccess || exec == NULL)
    return graph_fail(p, "cudaGraphInstantiate", e != cudaSuccess ? e : cudaErrorUnknown);
  *out_graph = (void *)exec;
  return ONYX_STATUS_OK;
}

static onyx_status cuda_graph_launch(void *state, void *graph) {
  onyx__cuda_provider *p = state;
  if (p == NULL || graph == NULL) return ONYX_STATUS_INVALID_ARGUMENT;
  if (!p->ready) return ONYX_STATUS_DEVICE_UNAVAILABLE;
  cudaError_t e = onyx__cuda_use_device(p);
  if (e == cudaSuccess) e = cudaGraphLaunch((cudaGraphExec_t)graph, p->stream);
  if (e != cudaSuccess) return graph_fail(p, "cudaGraphLaunch", e);
  return ONYX_STATUS_OK;
}

static void cuda_graph_destroy(void *state, void *graph) {
  const onyx__cuda_provider *p = state;
  if (p == NULL || graph == NULL) return;
  (void)onyx__cuda_use_device(p);
  /* A replay still in flight is not cut short: CUDA frees the executable graph once
   * it completes. */
  cudaError_t e = cudaGraphExecDestroy((cudaGraphExec_t)graph);
  if (e != cudaSuccess) (void)graph_fail(p, "cudaGraphExecDestroy", e);
}

const onyx_graph_table onyx__cuda_graph_table = {
    .struct_size = sizeof(onyx_graph_table),
    .version = ONYX_ABI_VERSION,
    .begin = cuda_graph_begin,
    .end = cuda_graph_end,
    .launch = cuda_graph_launch,
    .destroy = cuda_graph_destroy,
};
