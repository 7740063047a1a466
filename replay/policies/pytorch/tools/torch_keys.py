# torch_keys.py: which PYTORCH_CUDA_ALLOC_CONF keys and values the installed torch accepts (run on the
# GPU machine: python3 replay/policies/pytorch/tools/torch_keys.py). Used to check pt_conf.c's key table.
import glob, os, torch
print("torch", torch.__version__)
lib = os.path.dirname(torch.__file__) + "/lib"
data = b"".join(open(f, "rb").read() for f in glob.glob(lib + "/libc10*.so"))
for k in ["throw_on_cudamalloc_oom", "expandable_segments_reserve", "pinned_free_catch_all",
          "pinned_reserve_segment_size_mb", "graph_capture_record_stream_reuse", "per_process_memory_fraction",
          "large_segment_size_mb", "max_non_split_rounding_mb", "pinned_use_background_threads",
          "release_lock_on_cudamalloc", "pinned_num_register_threads", "pinned_use_cuda_host_register"]:
    print("string", k, k.encode() in data)
torch.zeros(1, device="cuda")
for kv in ["throw_on_cudamalloc_oom:False", "pinned_free_catch_all:False", "pinned_reserve_segment_size_mb:16",
           "expandable_segments_reserve:0.5", "max_split_size_mb:20", "max_split_size_mb:19",
           "large_segment_size_mb:10", "expandable_segments:true", "max_split_size_mb:20abc",
           "garbage_collection_threshold:1.0", "per_process_memory_fraction:1.5", "roundup_power2_divisions:0",
           "roundup_power2_divisions:[256:3]", "bogus_key:1", "backend:native", "max_non_split_rounding_mb:19"]:
    try:
        torch.cuda.memory._set_allocator_settings(kv)
        print("ok ", kv)
    except Exception as e:
        print("ERR", kv, "|", str(e).strip().splitlines()[0][:160])
