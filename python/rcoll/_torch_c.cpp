// _torch_c.cpp - the compiled torch.distributed backend "rcoll": a c10d::ProcessGroup (torch
// 1.x) or c10d::Backend (torch 2.x) over one rcoll communicator, from the same source.
//
// Each call checks its tensors, posts the matching nonblocking rcoll operation and returns a
// Work.  The communicator's progress thread moves the operation while torch computes; one
// completer thread per process group waits for the posted operations in order (rcoll_wait),
// runs their copy-back step and completes their Work and Future, so Work.wait() and a
// Future's callbacks (DDP) never poll the library themselves.  The communicator is created by
// python/rcoll/torch.py (the store exchange of the unique id, every init method) and handed
// over as its handle; this object destroys it at shutdown.
#include <torch/extension.h>
#include <torch/version.h>

#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#else
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#endif

// The CUDA half (torch 2.x with CUDA, built with torch's CUDA flags: python/rcoll/torch.py
// defines RCOLL_TORCH_CUDA): collectives on CUDA tensors are enqueued on the tensor's current
// stream through rcoll's stream-ordered calls (docs/torch.md, "CUDA tensors").
#if defined(RCOLL_TORCH_CUDA) && TORCH_VERSION_MAJOR >= 2
#define RC_CUDA 1
#include <c10/core/Event.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <optional>
#else
#define RC_CUDA 0
#endif
#if defined(RCOLL_TORCH_CUDA_REQUIRED) && !RC_CUDA
#error "the CUDA half is not compiled (RCOLL_TORCH_CUDA needs torch 2.x)"
#endif

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "rcoll.h"

namespace rcoll_torch {

#if TORCH_VERSION_MAJOR >= 2
using Base = c10d::Backend;
#else
using Base = c10d::ProcessGroup;
#endif

static const char *kBackend = "rcoll";

[[noreturn]] static void fail(const std::string &call, const std::string &why)
{
    throw std::runtime_error("rcoll backend: " + call + ": " + why);
}

static rcoll_datatype_t dtype_of(const std::string &call, const at::Tensor &t)
{
    switch (t.scalar_type()) {
    case at::kChar: return RCOLL_INT8;
    case at::kByte: return RCOLL_UINT8;
    case at::kShort: return RCOLL_INT16;
    case at::kInt: return RCOLL_INT32;
    case at::kLong: return RCOLL_INT64;
    case at::kHalf: return RCOLL_FLOAT16;
    case at::kBFloat16: return RCOLL_BFLOAT16;
    case at::kFloat: return RCOLL_FLOAT32;
    case at::kDouble: return RCOLL_FLOAT64;
    case at::kBool: return RCOLL_BOOL;
    default: fail(call, std::string("dtype ") + c10::toString(t.scalar_type()) +
                            " has no rcoll datatype");
    }
}

// A tensor as rcoll sees it: CPU or CUDA, contiguous (complex as its real pairs).
static at::Tensor plain(const std::string &call, const at::Tensor &t)
{
    if (t.device().is_cuda() && !RC_CUDA)
        fail(call, "a " + t.device().str() + " tensor: this build of the backend has no CUDA "
                   "(its torch has none, or it was built without CUDA's headers; "
                   "docs/torch.md, \"CUDA tensors\")");
    if (!t.device().is_cpu() && !t.device().is_cuda())
        fail(call, "a " + t.device().str() + " tensor: this backend takes CPU and CUDA tensors");
    at::Tensor v = t.is_complex() ? at::view_as_real(t) : t;
    dtype_of(call, v);
    return v;
}

// The reduction op; PREMUL_SUM's factor (set when the op is one) is applied by the caller.
static rcoll_op_t op_of(const std::string &call, const c10d::ReduceOp &op, double *factor)
{
    *factor = 1.0;
    switch (op.op_) {
    case c10d::ReduceOp::SUM: return RCOLL_SUM;
    case c10d::ReduceOp::AVG: return RCOLL_AVG;
    case c10d::ReduceOp::PRODUCT: return RCOLL_PROD;
    case c10d::ReduceOp::MIN: return RCOLL_MIN;
    case c10d::ReduceOp::MAX: return RCOLL_MAX;
    case c10d::ReduceOp::BAND: return RCOLL_BAND;
    case c10d::ReduceOp::BOR: return RCOLL_BOR;
    case c10d::ReduceOp::BXOR: return RCOLL_BXOR;
    case c10d::ReduceOp::PREMUL_SUM: {
        auto *s = dynamic_cast<c10d::NCCLPreMulSumSupplement *>(op.supplement_.get());
        if (!s) fail(call, "PREMUL_SUM without its factor");
#if TORCH_VERSION_MAJOR >= 2
        const at::Tensor &tf = s->tensor_factor;
        bool has_tensor = tf.defined();
#else
        bool has_tensor = !s->tensor_factors.empty();
        const at::Tensor tf = has_tensor ? s->tensor_factors[0] : at::Tensor();
        if (s->tensor_factors.size() > 1)
            fail(call, "PREMUL_SUM with one factor per tensor is not supported (give one)");
#endif
        if (has_tensor) {
            if (tf.numel() != 1) fail(call, "PREMUL_SUM's factor must be one element");
            *factor = tf.to(at::kDouble).item<double>();
        } else {
            *factor = s->double_factor;
        }
        return RCOLL_SUM;
    }
    default: fail(call, "reduce op " + std::to_string((int)op.op_) + " is not supported");
    }
}

class ProcessGroupRcoll;

// What the group's completer thread sleeps on, shared with its works (which may outlive the
// group): a work wakes it when someone needs its completion without waiting for it (a Future
// taken, is_completed polled).
struct Nudge {
    std::mutex mu;
    std::condition_variable cv;
    bool wanted = false;
    bool stop = false;
    void wake()
    {
        {
            std::lock_guard<std::mutex> lock(mu);
            wanted = true;
        }
        cv.notify_one();
    }
};

// One posted operation: its requests, the tensors it keeps alive, the step that copies
// results back (contiguous stand-ins, flattened lists), and its outputs (the Future's value).
class WorkRcoll : public c10d::Work {
  public:
    WorkRcoll(rcoll_comm_t comm, std::shared_ptr<Nudge> nudge, int rank, c10d::OpType type,
              std::string call, std::vector<at::Tensor> outputs)
        : c10d::Work(rank, type), comm_(comm), nudge_(std::move(nudge)), call_(std::move(call)),
          outputs_(std::move(outputs)),
          future_(c10::make_intrusive<c10::ivalue::Future>(
              c10::ListType::create(c10::TensorType::get())))
    {
    }

    bool isCompleted() override
    {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            if (completed_) return true;
        }
        nudge_->wake();  // polled: the completer finishes it
#if RC_CUDA
        if (event) return event->query();  // the stream has run it
#endif
        return false;
    }
    bool isSuccess() const override
    {
        std::lock_guard<std::mutex> lock(mutex_);
        return completed_ && !exception_;
    }
    bool wait(std::chrono::milliseconds timeout) override
    {
#if RC_CUDA
        // Enqueued on a stream: the current stream waits for it, the host does not.
        if (event) {
            {
                std::lock_guard<std::mutex> lock(mutex_);
                if (exception_) std::rethrow_exception(exception_);
            }
            rcoll_status_t e = RCOLL_OK;
            rcoll_comm_get_async_error(stream_comm, &e);
            if (e < 0)
                fail(call_, std::string(rcoll_comm_last_error(stream_comm)) + " (" +
                                rcoll_status_string(e) + ")");
            c10::cuda::CUDAGuard guard(device);
            event->block(c10::cuda::getCurrentCUDAStream(device.index()));
            return true;
        }
#endif
        // Not taken by the completer yet: complete it here, in the waiting thread (no
        // hand-off between threads: a small all-reduce's wait costs what rcoll_wait does).
        if (timeout == std::chrono::milliseconds(0) && claim()) complete();
        std::unique_lock<std::mutex> lock(mutex_);
        if (timeout == std::chrono::milliseconds(0)) {
            cv_.wait(lock, [&] { return completed_; });
        } else if (!cv_.wait_for(lock, timeout, [&] { return completed_; })) {
            fail(call_, "timed out waiting for the operation (Work.wait's timeout)");
        }
        if (exception_) std::rethrow_exception(exception_);
        return true;
    }
    std::vector<at::Tensor> result() override { return outputs_; }
    c10::intrusive_ptr<c10::ivalue::Future> getFuture() override
    {
        nudge_->wake();  // nobody may wait: the completer completes it (DDP's buckets)
        return future_;
    }
    bool done()
    {
        std::lock_guard<std::mutex> lock(mutex_);
        return completed_;
    }

    // Set by the poster, run by whoever completes it.
    std::vector<rcoll_request_t> reqs;
    std::vector<at::Tensor> keep;
    std::function<void()> after;

    // The device of the call's tensors (the first one given to the group's stand_in); a CUDA
    // call's Future is made for that device (torch's stream semantics for its callbacks).
    c10::Device device{c10::DeviceType::CPU};
    bool device_set = false;
    void on(c10::Device d)
    {
        device = d;
        device_set = true;
        if (d.is_cuda())
            future_ = c10::make_intrusive<c10::ivalue::Future>(
                c10::ListType::create(c10::TensorType::get()), std::vector<c10::Device>{d});
    }
    bool cuda() const { return device.is_cuda(); }
    // A CUDA call's collectives: enqueued on stream (the device's current stream when posted)
    // through stream_comm, the group's communicator for stream work; the event recorded after
    // them.  The poster holds the group's stream lock and a device guard until it submits.
    void *stream = nullptr;
    rcoll_comm_t stream_comm = nullptr;
    int stream_posted = 0;
#if RC_CUDA
    std::unique_ptr<c10::Event> event;
    std::unique_lock<std::mutex> stream_lock;
    std::optional<c10::cuda::CUDAGuard> guard;
#endif

    // One thread completes a work (its requests are that thread's to wait on): the waiter or
    // the group's completer, whichever takes it first.
    bool claim() { return !claimed_.exchange(true); }

    // Wait for every request (the first failure's text kept), copy back, complete the Work
    // and its Future.
    void complete()
    {
        rcoll_comm_t comm = comm_;
        std::string err;
#if RC_CUDA
        if (event) {  // stream work: done when its event is, failed if its communicator is
            try {
                event->synchronize();
            } catch (const std::exception &e) {
                err = e.what();
            }
            rcoll_status_t e = RCOLL_OK;
            rcoll_comm_get_async_error(stream_comm, &e);
            if (err.empty() && e < 0)
                err = std::string(rcoll_comm_last_error(stream_comm)) + " (" +
                      rcoll_status_string(e) + ")";
        }
#endif
        for (auto &r : reqs) {
            rcoll_status_t st = rcoll_wait(&r);
            if (st < 0 && err.empty())
                err = std::string(rcoll_comm_last_error(comm)) + " (" +
                      rcoll_status_string(st) + ")";
        }
        if (err.empty() && after) {
            try {
                after();
            } catch (const std::exception &e) {
                err = e.what();
            }
        }
        keep.clear();
        after = nullptr;
        std::exception_ptr ex;
        if (!err.empty())
            ex = std::make_exception_ptr(std::runtime_error("rcoll backend: " + call_ + ": " + err));
        {
            std::lock_guard<std::mutex> lock(mutex_);
            completed_ = true;
            exception_ = ex;
        }
        cv_.notify_all();
        if (ex)
            future_->setError(ex);
        else
            future_->markCompleted(c10::IValue(outputs_));
    }

  private:
    rcoll_comm_t comm_;
    std::shared_ptr<Nudge> nudge_;
    std::string call_;
    std::vector<at::Tensor> outputs_;
    c10::intrusive_ptr<c10::ivalue::Future> future_;
    std::atomic<bool> claimed_{false};
};

// Posts one rcoll operation of work w: rcoll_<name>_stream on w's stream for a CUDA call
// (streamed() sets it up), rcoll_i<name> with a request of w's otherwise.
#define RC_POST(call, w, name, ...)                                                            \
    post(call, w,                                                                              \
         streamed(call, w) ? rcoll_##name##_stream(__VA_ARGS__, (w)->stream_comm, (w)->stream) \
                           : rcoll_i##name(__VA_ARGS__, comm_, next(w)))

class ProcessGroupRcoll : public Base {
  public:
    ProcessGroupRcoll(uintptr_t comm, int rank, int size)
        : Base(rank, size), comm_(reinterpret_cast<rcoll_comm_t>(comm)),
          thread_([this] { run(); })
    {
    }
    ~ProcessGroupRcoll() override { shutdown(); }

    const std::string getBackendName() const override { return kBackend; }

    // Stop the completer (after the operations posted so far) and destroy the communicator.
    void shutdown()
    {
        {
            std::lock_guard<std::mutex> lock(nudge_->mu);
            if (nudge_->stop) return;
            nudge_->stop = true;
        }
        nudge_->cv.notify_all();
        // The completer may drop the last reference to a tensor that has a Python object,
        // which takes the GIL: never join it holding the GIL (the destructor runs inside a
        // Python decref; shutdown() from Python releases it already).
        std::unique_ptr<pybind11::gil_scoped_release> nogil;
        if (Py_IsInitialized() && PyGILState_Check()) nogil.reset(new pybind11::gil_scoped_release());
        if (thread_.joinable()) thread_.join();
        // the stream communicator's destroy waits until its stream work has run
        if (stream_comm_) rcoll_comm_destroy(stream_comm_);
        stream_comm_ = nullptr;
        if (comm_) rcoll_comm_destroy(comm_);
        comm_ = nullptr;
    }

    // ---- collectives ----
    c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor> &tensors,
                                             const c10d::AllreduceOptions &opts) override
    {
        return reduce_each("allreduce", c10d::OpType::ALLREDUCE, tensors, opts.reduceOp, -1);
    }
    c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
        std::vector<at::Tensor> &tensors, const c10d::AllreduceCoalescedOptions &opts) override
    {
        return reduce_each("allreduce_coalesced", c10d::OpType::ALLREDUCE_COALESCED, tensors,
                           opts.reduceOp, -1);
    }
    c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor> &tensors,
                                          const c10d::ReduceOptions &opts) override
    {
        one("reduce", tensors);
        return reduce_each("reduce", c10d::OpType::REDUCE, tensors, opts.reduceOp,
                           (int)opts.rootRank);
    }
    c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor> &tensors,
                                             const c10d::BroadcastOptions &opts) override
    {
        const std::string call = "broadcast";
        one(call, tensors);
        auto w = make(c10d::OpType::BROADCAST, call, tensors);
        at::Tensor t = stand_in(call, tensors[0], w.get(), true);
        RC_POST(call, w.get(), bcast, t.data_ptr(), (size_t)t.numel(), dtype_of(call, t),
                                         (int)opts.rootRank);
        return submit(w);
    }
    c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor &output, at::Tensor &input,
                                                   const c10d::AllgatherOptions &) override
    {
        const std::string call = "_allgather_base";
        std::vector<at::Tensor> outs{output};
        auto w = make(c10d::OpType::_ALLGATHER_BASE, call, outs);
        at::Tensor in = stand_in(call, input, w.get(), false);
        at::Tensor out = stand_in(call, output, w.get(), true);
        if (out.numel() != in.numel() * getSize())
            fail(call, "output has " + std::to_string(out.numel()) + " elements, not size x " +
                           std::to_string(in.numel()));
        same_type(call, in, out);
        RC_POST(call, w.get(), allgather, in.data_ptr(), out.data_ptr(), (size_t)in.numel(),
                                             dtype_of(call, in));
        return submit(w);
    }
#if TORCH_VERSION_MAJOR >= 2
    // The coalesced forms (torch's _coalescing_manager, FSDP): one all-gather or
    // reduce-scatter per pair, all in one Work.
    c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
        std::vector<at::Tensor> &outputs, std::vector<at::Tensor> &inputs,
        const c10d::AllgatherOptions &) override
    {
        const std::string call = "allgather_into_tensor_coalesced";
        if (outputs.size() != inputs.size())
            fail(call, std::to_string(outputs.size()) + " outputs for " +
                           std::to_string(inputs.size()) + " inputs");
        auto w = make(c10d::OpType::COALESCED, call, outputs);
        for (size_t i = 0; i < inputs.size(); i++) {
            at::Tensor in = stand_in(call, inputs[i], w.get(), false);
            at::Tensor out = stand_in(call, outputs[i], w.get(), true);
            if (out.numel() != in.numel() * getSize())
                fail(call, "output " + std::to_string(i) + " has " +
                               std::to_string(out.numel()) + " elements, not size x " +
                               std::to_string(in.numel()));
            same_type(call, in, out);
            RC_POST(call, w.get(), allgather, in.data_ptr(), out.data_ptr(),
                                                 (size_t)in.numel(), dtype_of(call, in));
        }
        return submit(w);
    }
    c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
        std::vector<at::Tensor> &outputs, std::vector<at::Tensor> &inputs,
        const c10d::ReduceScatterOptions &opts) override
    {
        const std::string call = "reduce_scatter_tensor_coalesced";
        if (outputs.size() != inputs.size())
            fail(call, std::to_string(outputs.size()) + " outputs for " +
                           std::to_string(inputs.size()) + " inputs");
        auto w = make(c10d::OpType::COALESCED, call, outputs);
        double f;
        rcoll_op_t op = op_of(call, opts.reduceOp, &f);
        for (size_t i = 0; i < inputs.size(); i++) {
            at::Tensor in = stand_in(call, inputs[i], w.get(), false);
            if (f != 1.0) in = scaled(in, f, w.get());
            at::Tensor out = stand_in(call, outputs[i], w.get(), true);
            if (in.numel() != out.numel() * getSize())
                fail(call, "input " + std::to_string(i) + " has " + std::to_string(in.numel()) +
                               " elements, not size x " + std::to_string(out.numel()));
            same_type(call, in, out);
            RC_POST(call, w.get(), reduce_scatter, in.data_ptr(), out.data_ptr(),
                                                      (size_t)out.numel(), dtype_of(call, in),
                                                      op);
        }
        return submit(w);
    }
#endif
    c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>> &outputs,
                                             std::vector<at::Tensor> &inputs,
                                             const c10d::AllgatherOptions &) override
    {
        const std::string call = "allgather";
        one(call, inputs);
        int n = getSize();
        if (outputs.size() != 1 || (int)outputs[0].size() != n)
            fail(call, "expects one list of " + std::to_string(n) + " output tensors");
        auto w = make(c10d::OpType::ALLGATHER, call, outputs[0]);
        at::Tensor in = stand_in(call, inputs[0], w.get(), false);
        // every rank's block gathered into one flat tensor, then copied to the list; blocks
        // of different sizes (each rank's output list says them) go as an all-gather-v
        std::vector<size_t> counts((size_t)n), displs((size_t)n);
        size_t total = 0;
        bool even = true;
        for (int p = 0; p < n; p++) {
            const at::Tensor &o = outputs[0][(size_t)p];
            same_type(call, in, plain(call, o));
            counts[(size_t)p] = (size_t)o.numel();
            displs[(size_t)p] = total;
            total += counts[(size_t)p];
            even = even && o.numel() == in.numel();
        }
        if ((int64_t)counts[(size_t)getRank()] != in.numel())
            fail(call, "this rank's output tensor has " + std::to_string(counts[(size_t)getRank()]) +
                           " elements, its input " + std::to_string(in.numel()));
        at::Tensor flat = at::empty({(int64_t)total}, in.options());
        w->keep.push_back(flat);
        unflatten_after(w.get(), outputs[0], flat, displs, counts);
        rcoll_datatype_t dt = dtype_of(call, in);
        if (even)
            RC_POST(call, w.get(), allgather, in.data_ptr(), flat.data_ptr(),
                                                 (size_t)in.numel(), dt);
        else
            RC_POST(call, w.get(), allgatherv, in.data_ptr(), (size_t)in.numel(),
                                                  flat.data_ptr(), counts.data(), displs.data(),
                                                  dt);
        return submit(w);
    }
    c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
        at::Tensor &output, at::Tensor &input, const c10d::ReduceScatterOptions &opts) override
    {
        const std::string call = "_reduce_scatter_base";
        std::vector<at::Tensor> outs{output};
        auto w = make(c10d::OpType::_REDUCE_SCATTER_BASE, call, outs);
        double f;
        rcoll_op_t op = op_of(call, opts.reduceOp, &f);
        at::Tensor in = stand_in(call, input, w.get(), false);
        if (f != 1.0) in = scaled(in, f, w.get());
        at::Tensor out = stand_in(call, output, w.get(), true);
        if (in.numel() != out.numel() * getSize())
            fail(call, "input has " + std::to_string(in.numel()) + " elements, not size x " +
                           std::to_string(out.numel()));
        same_type(call, in, out);
        RC_POST(call, w.get(), reduce_scatter, in.data_ptr(), out.data_ptr(),
                                                  (size_t)out.numel(), dtype_of(call, in), op);
        return submit(w);
    }
    c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor> &outputs,
                                                  std::vector<std::vector<at::Tensor>> &inputs,
                                                  const c10d::ReduceScatterOptions &opts) override
    {
        const std::string call = "reduce_scatter";
        one(call, outputs);
        int n = getSize();
        if (inputs.size() != 1 || (int)inputs[0].size() != n)
            fail(call, "expects one list of " + std::to_string(n) + " input tensors");
        bool even = true;
        for (auto &i : inputs[0]) even = even && i.numel() == outputs[0].numel();
        at::Tensor flat = at::cat(flatten_all(call, inputs[0]));
        if (even) return _reduce_scatter_base(outputs[0], flat, opts);
        // blocks of different sizes (the input list says them): a reduce-scatter-v
        std::vector<at::Tensor> outs{outputs[0]};
        auto w = make(c10d::OpType::REDUCE_SCATTER, call, outs);
        double f;
        rcoll_op_t op = op_of(call, opts.reduceOp, &f);
        w->keep.push_back(flat);
        if (f != 1.0) flat.mul_(f);
        at::Tensor out = stand_in(call, outputs[0], w.get(), true);
        same_type(call, flat, out);
        std::vector<size_t> counts((size_t)n);
        for (int p = 0; p < n; p++) counts[(size_t)p] = (size_t)inputs[0][(size_t)p].numel();
        if ((int64_t)counts[(size_t)getRank()] != out.numel())
            fail(call, "the output tensor's size differs from this rank's input block");
        RC_POST(call, w.get(), reduce_scatterv, flat.data_ptr(), out.data_ptr(),
                                                   counts.data(), dtype_of(call, out), op);
        return submit(w);
    }
    c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>> &outputs,
                                          std::vector<at::Tensor> &inputs,
                                          const c10d::GatherOptions &opts) override
    {
        const std::string call = "gather";
        one(call, inputs);
        int n = getSize(), root = (int)opts.rootRank;
        bool me = getRank() == root;
        if (me ? outputs.size() != 1 || (int)outputs[0].size() != n : !outputs.empty())
            fail(call, me ? "the root expects one list of " + std::to_string(n) + " outputs"
                          : "only the root passes output tensors");
        auto w = make(c10d::OpType::GATHER, call, me ? outputs[0] : std::vector<at::Tensor>{});
        at::Tensor in = stand_in(call, inputs[0], w.get(), false);
        at::Tensor flat;
        if (me) {
            for (auto &o : outputs[0])
                if (o.numel() != in.numel()) fail(call, "an output's size differs from the input's");
            flat = at::empty({(int64_t)n * in.numel()}, in.options());
            w->keep.push_back(flat);
            std::vector<size_t> offs((size_t)n), lens((size_t)n, (size_t)in.numel());
            for (int p = 0; p < n; p++) offs[(size_t)p] = (size_t)p * (size_t)in.numel();
            unflatten_after(w.get(), outputs[0], flat, offs, lens);
        }
        RC_POST(call, w.get(), gather, in.data_ptr(), me ? flat.data_ptr() : nullptr,
                                          (size_t)in.numel(), dtype_of(call, in), root);
        return submit(w);
    }
    c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor> &outputs,
                                           std::vector<std::vector<at::Tensor>> &inputs,
                                           const c10d::ScatterOptions &opts) override
    {
        const std::string call = "scatter";
        one(call, outputs);
        int n = getSize(), root = (int)opts.rootRank;
        bool me = getRank() == root;
        if (me ? inputs.size() != 1 || (int)inputs[0].size() != n : !inputs.empty())
            fail(call, me ? "the root expects one list of " + std::to_string(n) + " inputs"
                          : "only the root passes input tensors");
        auto w = make(c10d::OpType::SCATTER, call, outputs);
        at::Tensor out = stand_in(call, outputs[0], w.get(), true);
        at::Tensor flat;
        if (me) {
            for (auto &i : inputs[0])
                if (i.numel() != out.numel()) fail(call, "an input's size differs from the output's");
            flat = at::cat(flatten_all(call, inputs[0]));
            w->keep.push_back(flat);
        }
        RC_POST(call, w.get(), scatter, me ? flat.data_ptr() : nullptr, out.data_ptr(),
                                           (size_t)out.numel(), dtype_of(call, out), root);
        return submit(w);
    }
    c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor &output, at::Tensor &input,
                                                 std::vector<int64_t> &out_splits,
                                                 std::vector<int64_t> &in_splits,
                                                 const c10d::AllToAllOptions &) override
    {
        const std::string call = "alltoall_base";
        std::vector<at::Tensor> outs{output};
        auto w = make(c10d::OpType::ALLTOALL_BASE, call, outs);
        at::Tensor in = stand_in(call, input, w.get(), false);
        at::Tensor out = stand_in(call, output, w.get(), true);
        same_type(call, in, out);
        int n = getSize();
        if (out_splits.empty() && in_splits.empty()) {
            if (in.numel() % n || out.numel() != in.numel())
                fail(call, "input and output must have the same size, a multiple of the group's");
            RC_POST(call, w.get(), alltoall, in.data_ptr(), out.data_ptr(),
                                                (size_t)(in.numel() / n), dtype_of(call, in));
            return submit(w);
        }
        // Splits are along dimension 0: elements = rows x the elements of a row.
        int64_t in_row = in.dim() && in.size(0) ? in.numel() / in.size(0) : 1;
        int64_t out_row = out.dim() && out.size(0) ? out.numel() / out.size(0) : 1;
        std::vector<size_t> counts(4 * (size_t)n);  // copied by rcoll at the call
        size_t *sc = counts.data(), *sd = sc + n, *rc = sd + n, *rd = rc + n;
        size_t soff = 0, roff = 0;
        for (int p = 0; p < n; p++) {
            int64_t s = in_splits.empty() ? (in.dim() ? in.size(0) / n : 0) : in_splits[p];
            int64_t r = out_splits.empty() ? (out.dim() ? out.size(0) / n : 0) : out_splits[p];
            sc[p] = (size_t)(s * in_row), sd[p] = soff, soff += sc[p];
            rc[p] = (size_t)(r * out_row), rd[p] = roff, roff += rc[p];
        }
        if (soff > (size_t)in.numel() || roff > (size_t)out.numel())
            fail(call, "the splits add up to more than the tensors hold");
        RC_POST(call, w.get(), alltoallv, in.data_ptr(), sc, sd, out.data_ptr(), rc, rd,
                                             dtype_of(call, in));
        return submit(w);
    }
    c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor> &outputs,
                                            std::vector<at::Tensor> &inputs,
                                            const c10d::AllToAllOptions &) override
    {
        const std::string call = "alltoall";
        int n = getSize();
        if ((int)outputs.size() != n || (int)inputs.size() != n)
            fail(call, "expects " + std::to_string(n) + " input and output tensors");
        // the inputs packed, the outputs gathered flat and copied back: an all-to-all-v
        auto w = make(c10d::OpType::ALLTOALL, call, outputs);
        at::Tensor in = at::cat(flatten_all(call, inputs));
        on_device(call, w.get(), in);
        w->keep.push_back(in);
        std::vector<size_t> counts(4 * (size_t)n);  // copied by rcoll at the call
        size_t *sc = counts.data(), *sd = sc + n, *rc = sd + n, *rd = rc + n;
        size_t soff = 0, roff = 0;
        for (int p = 0; p < n; p++) {
            same_type(call, in, plain(call, outputs[(size_t)p]));
            sc[p] = (size_t)inputs[(size_t)p].numel(), sd[p] = soff, soff += sc[p];
            rc[p] = (size_t)outputs[(size_t)p].numel(), rd[p] = roff, roff += rc[p];
        }
        at::Tensor flat = at::empty({(int64_t)roff}, in.options());
        w->keep.push_back(flat);
        unflatten_after(w.get(), outputs, flat, std::vector<size_t>(rd, rd + n),
                        std::vector<size_t>(rc, rc + n));
        RC_POST(call, w.get(), alltoallv, in.data_ptr(), sc, sd, flat.data_ptr(), rc, rd,
                                             dtype_of(call, in));
        return submit(w);
    }
    c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions &) override
    {
        auto w = make(c10d::OpType::BARRIER, "barrier", {});
        post("barrier", w.get(), rcoll_ibarrier(comm_, next(w.get())));
        return submit(w);
    }
    c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor> &tensors, int dst,
                                        int /* tag */) override
    {
        return p2p("send", c10d::OpType::SEND, tensors, dst);
    }
    c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor> &tensors, int src,
                                        int /* tag */) override
    {
        return p2p("recv", c10d::OpType::RECV, tensors, src);
    }
    c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor> &, int) override
    {
        fail("recv_anysource", "not supported by rcoll (name the source rank)");
    }

    uintptr_t comm() const { return reinterpret_cast<uintptr_t>(comm_); }

  private:
    static void one(const std::string &call, const std::vector<at::Tensor> &tensors)
    {
        if (tensors.size() != 1)
            fail(call, "expects one tensor per call (got " + std::to_string(tensors.size()) +
                           ")");
    }
    static void same_type(const std::string &call, const at::Tensor &a, const at::Tensor &b)
    {
        if (a.scalar_type() != b.scalar_type())
            fail(call, "input and output dtypes differ");
    }
    static std::vector<at::Tensor> flatten_all(const std::string &call,
                                               const std::vector<at::Tensor> &ts)
    {
        std::vector<at::Tensor> v;
        for (auto &t : ts) v.push_back(plain(call, t).reshape({-1}));
        return v;
    }
    c10::intrusive_ptr<WorkRcoll> make(c10d::OpType type, const std::string &call,
                                       const std::vector<at::Tensor> &outputs)
    {
        if (!comm_) fail(call, "the process group was shut down");
        return c10::make_intrusive<WorkRcoll>(comm_, nudge_, getRank(), type, call, outputs);
    }
    // t as a contiguous CPU tensor rcoll may use; a copy when t is not contiguous (written
    // back when the operation is done if out).  Kept alive by the Work either way.
    at::Tensor stand_in(const std::string &call, const at::Tensor &t, WorkRcoll *w, bool out)
    {
        at::Tensor v = plain(call, t);
        on_device(call, w, v);
        w->keep.push_back(t);
        if (v.is_contiguous()) return v;
        at::Tensor c = v.contiguous();
        w->keep.push_back(c);
        if (out) {
            auto prev = w->after;
            w->after = [v, c, prev]() mutable {
                v.copy_(c);
                if (prev) prev();
            };
        }
        return c;
    }
    // When w is done: outs[i] = flat[offs[i], offs[i] + lens[i]) (a list form's results,
    // gathered into one flat tensor), before w's earlier copy-back steps.
    static void unflatten_after(WorkRcoll *w, const std::vector<at::Tensor> &outs,
                                const at::Tensor &flat, std::vector<size_t> offs,
                                std::vector<size_t> lens)
    {
        auto prev = w->after;
        w->after = [outs, flat, offs, lens, prev]() mutable {
            for (size_t i = 0; i < outs.size(); i++)
                if (lens[i])
                    outs[i].copy_(flat.narrow(0, (int64_t)offs[i], (int64_t)lens[i])
                                      .view_as(outs[i]));
            if (prev) prev();
        };
    }
    static at::Tensor scaled(const at::Tensor &t, double f, WorkRcoll *w)
    {
        at::Tensor s = t.mul(f);
        w->keep.push_back(s);
        return s;
    }
    // Every tensor of a call on one device (rcoll's stream and staging are per call).
    static void on_device(const std::string &call, WorkRcoll *w, const at::Tensor &t)
    {
        if (!w->device_set)
            w->on(t.device());
        else if (t.device() != w->device)
            fail(call, "tensors on " + w->device.str() + " and " + t.device().str() +
                           " in one call");
    }
    // Whether w's operations go in stream order (a CUDA call): the first time, the group's
    // stream communicator is made if it is not yet (rcoll_comm_dup, collective: every rank's
    // first CUDA call is the same call), w takes the stream lock (one thread enqueues on it at
    // a time), a guard of its device, and the device's current stream.
    bool streamed(const std::string &call, WorkRcoll *w)
    {
        if (!w->cuda()) return false;
#if RC_CUDA
        if (w->stream_comm) return true;
        w->stream_lock = std::unique_lock<std::mutex>(stream_mu_);
        w->guard.emplace(w->device);
        if (!stream_comm_) {
            cuda_ready(call);
            drain();  // the communicator runs nothing else while it is duplicated
            rcoll_comm_t c = nullptr;
            rcoll_status_t st = rcoll_comm_dup(comm_, &c);
            if (st < 0)
                fail(call, "making the communicator for stream work (rcoll_comm_dup): " +
                               std::string(rcoll_comm_last_error(comm_)) + " (" +
                               rcoll_status_string(st) + ")");
            stream_comm_ = c;
        }
        w->stream_comm = stream_comm_;
        w->stream = c10::cuda::getCurrentCUDAStream(w->device.index()).stream();
        return true;
#else
        fail(call, "a CUDA tensor in a build without CUDA");
#endif
    }
#if RC_CUDA
    // rcoll classifies CUDA buffers from the first CUDA call of the process on; its
    // sentence when there is no usable driver (RCOLL_CUDA=0, none loaded).
    static void cuda_ready(const std::string &call)
    {
        int n = 0;
        if (rcoll_cuda_device_count(&n) != RCOLL_OK)
            fail(call, std::string("rcoll cannot use CUDA: ") + rcoll_cuda_last_error());
    }
    // Every queued work complete (their failures stay theirs, raised by their own wait).
    void drain()
    {
        std::deque<c10::intrusive_ptr<WorkRcoll>> q;
        {
            std::lock_guard<std::mutex> lock(qmu_);
            q.swap(queue_);
        }
        for (auto &w : q) {
            if (w->claim()) w->complete();
            while (!w->done()) std::this_thread::sleep_for(std::chrono::microseconds(50));
        }
    }
#endif
    static rcoll_request_t *next(WorkRcoll *w)
    {
        w->reqs.push_back(nullptr);
        return &w->reqs.back();
    }
    void post(const std::string &call, WorkRcoll *w, rcoll_status_t st)
    {
        if (st < 0 && w->stream_comm)  // the parts before it (coalesced forms) are enqueued
            fail(call, std::string(rcoll_comm_last_error(w->stream_comm)) + " (" +
                           rcoll_status_string(st) + ")" +
                           (w->stream_posted ? " (after " + std::to_string(w->stream_posted) +
                                                   " parts of this call were enqueued)"
                                             : std::string()));
        if (w->stream_comm) {
            w->stream_posted++;
            return;
        }
        if (st < 0) {
            w->reqs.pop_back();  // not posted
            for (auto &r : w->reqs) rcoll_wait(&r);  // the earlier parts of this call
            w->reqs.clear();
            fail(call, std::string(rcoll_comm_last_error(comm_)) + " (" +
                           rcoll_status_string(st) + ")");
        }
    }
    // One send (to peer) or receive (from peer) of one tensor; a receive's stand-in is
    // written back.  torch's tags are not used: rcoll matches messages between two ranks in
    // order.
    c10::intrusive_ptr<c10d::Work> p2p(const std::string &call, c10d::OpType type,
                                       std::vector<at::Tensor> &tensors, int peer)
    {
        one(call, tensors);
        bool is_recv = type == c10d::OpType::RECV;
        auto w = make(type, call, tensors);
        at::Tensor t = stand_in(call, tensors[0], w.get(), is_recv);
        rcoll_datatype_t dt = dtype_of(call, t);
        size_t count = (size_t)t.numel();
#if RC_CUDA
        // rcoll has no stream-ordered point-to-point: the device buffer goes as a staged
        // nonblocking call on the group's communicator, once the current stream has written
        // it (a send) or finished with it (a receive); its wait blocks the host.
        if (w->cuda()) {
            cuda_ready(call);
            c10::cuda::CUDAGuard guard(w->device);
            c10::Event ev(c10::DeviceType::CUDA);
            ev.record(c10::cuda::getCurrentCUDAStream(w->device.index()));
            ev.synchronize();
        }
#endif
        post(call, w.get(), is_recv
                                ? rcoll_irecv(t.data_ptr(), count, dt, peer, comm_, next(w.get()))
                                : rcoll_isend(t.data_ptr(), count, dt, peer, comm_, next(w.get())));
        return submit(w);
    }
    // All-reduce (root < 0) or reduce to root of each tensor, in place.
    c10::intrusive_ptr<c10d::Work> reduce_each(const std::string &call, c10d::OpType type,
                                               std::vector<at::Tensor> &tensors,
                                               const c10d::ReduceOp &rop, int root)
    {
        if (tensors.empty()) fail(call, "no tensor");
        auto w = make(type, call, tensors);
        double f;
        rcoll_op_t op = op_of(call, rop, &f);
        w->reqs.reserve(tensors.size());
        for (auto &t0 : tensors) {
            at::Tensor t = stand_in(call, t0, w.get(), true);
            if (f != 1.0) t.mul_(f);
            rcoll_datatype_t dt = dtype_of(call, t);
            if (root < 0)
                RC_POST(call, w.get(), allreduce, RCOLL_IN_PLACE, t.data_ptr(),
                                                     (size_t)t.numel(), dt, op);
            else if (root == getRank())
                RC_POST(call, w.get(), reduce, RCOLL_IN_PLACE, t.data_ptr(), (size_t)t.numel(),
                                                  dt, op, root);
            else  // the others only send (their tensor is left as it was)
                RC_POST(call, w.get(), reduce, t.data_ptr(), nullptr, (size_t)t.numel(), dt,
                                                  op, root);
        }
        return submit(w);
    }
    // Queued for the completer, which is not woken: a blocking call's wait() completes its
    // work in the calling thread; works nobody waits for wake it (Nudge).  Works completed
    // already leave the front of the queue here.
    c10::intrusive_ptr<c10d::Work> submit(const c10::intrusive_ptr<WorkRcoll> &w)
    {
#if RC_CUDA
        // Stream work: the copy-back steps follow it on the stream, then its event; the
        // completer is woken to finish it when the event has fired (the Future, the tensors
        // kept), since Work.wait() does not block the host for it.
        if (w->stream_comm) {
            c10::Stream s = c10::cuda::getStreamFromExternal(
                static_cast<cudaStream_t>(w->stream), w->device.index());
            if (w->after) {
                auto after = std::move(w->after);
                w->after = nullptr;
                after();
            }
            w->event = std::make_unique<c10::Event>(c10::DeviceType::CUDA);
            w->event->record(s);
            w->guard.reset();
            w->stream_lock = std::unique_lock<std::mutex>();
            {
                std::lock_guard<std::mutex> lock(qmu_);
                while (!queue_.empty() && queue_.front()->done()) queue_.pop_front();
                queue_.push_back(w);
            }
            nudge_->wake();
            return w;
        }
#endif
        std::lock_guard<std::mutex> lock(qmu_);
        while (!queue_.empty() && queue_.front()->done()) queue_.pop_front();
        queue_.push_back(w);
        return w;
    }
    // The completer: when woken (or stopping), every queued work nobody has taken, in order.
    void run()
    {
        for (;;) {
            bool stop;
            {
                std::unique_lock<std::mutex> lock(nudge_->mu);
                nudge_->cv.wait(lock, [&] { return nudge_->stop || nudge_->wanted; });
                nudge_->wanted = false;
                stop = nudge_->stop;
            }
            for (;;) {
                c10::intrusive_ptr<WorkRcoll> w;
                {
                    std::lock_guard<std::mutex> lock(qmu_);
                    if (queue_.empty()) break;
                    w = queue_.front();
                    queue_.pop_front();
                }
                if (w->claim()) w->complete();
            }
            if (stop) return;
        }
    }

    rcoll_comm_t comm_;
    rcoll_comm_t stream_comm_ = nullptr;  // for stream work (CUDA calls), made at the first
    std::mutex stream_mu_;                 // one thread enqueues on it at a time
    std::shared_ptr<Nudge> nudge_ = std::make_shared<Nudge>();
    std::mutex qmu_;  // the queue (posting threads, the completer)
    std::deque<c10::intrusive_ptr<WorkRcoll>> queue_;
    std::thread thread_;
};

}  // namespace rcoll_torch

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m)
{
    namespace py = pybind11;
    py::module::import("torch.distributed");
    py::class_<rcoll_torch::ProcessGroupRcoll, rcoll_torch::Base,
               c10::intrusive_ptr<rcoll_torch::ProcessGroupRcoll>>(m, "ProcessGroupRcoll")
        .def(py::init<uintptr_t, int, int>(), py::arg("comm"), py::arg("rank"), py::arg("size"),
             "A process group over the rcoll communicator whose handle is comm (it owns it).")
        .def("shutdown", &rcoll_torch::ProcessGroupRcoll::shutdown,
             py::call_guard<py::gil_scoped_release>())
        .def_property_readonly("comm", &rcoll_torch::ProcessGroupRcoll::comm);
    m.attr("TORCH_VERSION_MAJOR") = TORCH_VERSION_MAJOR;
    m.attr("CUDA") = bool(RC_CUDA);  // CUDA tensors go in stream order
}
