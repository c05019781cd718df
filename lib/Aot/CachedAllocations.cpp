//===- CachedAllocations.cpp - reuse a module's large temporaries ---------===//
//
// A whole model lowered by the CPU pipeline mallocs every intermediate
// tensor and frees it after its last use, on every call. glibc serves a
// block of more than its mmap threshold (at most 32 MiB) with a fresh mmap
// and returns freed heap tops to the system, so each call of a forward
// faults in, and the kernel clears, all of its temporaries again: a quarter
// of a batch-8 Swin-T forward (perf). A forward allocates the same sizes
// call after call, so the module's own calls of malloc and free go through
// a small per-thread cache of large freed blocks instead:
//
//   free(p):   if p is a large block and the thread's cache has room, keep p
//              (its size is malloc_usable_size(p)); else free it.
//   malloc(n): a cached block of at least n bytes, not much more, else
//              malloc(n).
//
// Every block stays a plain malloc block, so one may leave the module
// (`_mlir_ciface_F`'s results, which the caller frees with free()) or be
// freed by another thread. The cache is thread-local: no lock, and the
// OpenMP threads that allocate inside parallel loops keep their own.
//
//===----------------------------------------------------------------------===//

#include "Rpe/Aot.h"

#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Module.h"

using namespace llvm;

namespace {
/// Blocks below this many bytes stay with malloc: it serves them from its
/// heap, without a system call, up to its mmap threshold (128 KiB at first).
constexpr uint64_t kMinCachedBytes = 64 * 1024;
/// How many blocks, and at most how many bytes, a thread keeps.
constexpr unsigned kSlots = 64;
constexpr uint64_t kMaxCachedBytes = uint64_t(1) << 30;

/// The thread's cache: kSlots (block, usable size) pairs (null: empty) and
/// the bytes they hold.
struct Cache {
  GlobalVariable *blocks;
  GlobalVariable *sizes;
  GlobalVariable *bytes;
};

GlobalVariable *createThreadLocal(Module &module, Type *type, StringRef name) {
  auto *global = new GlobalVariable(module, type, /*isConstant=*/false,
                                    GlobalValue::InternalLinkage,
                                    Constant::getNullValue(type), name);
  global->setThreadLocal(true);
  return global;
}

/// The addresses of slot `index`'s block and size.
std::pair<Value *, Value *> slotAddresses(IRBuilder<> &b, const Cache &cache,
                                          Value *index) {
  Value *zero = b.getInt64(0);
  return {b.CreateInBoundsGEP(cache.blocks->getValueType(), cache.blocks,
                              {zero, index}),
          b.CreateInBoundsGEP(cache.sizes->getValueType(), cache.sizes,
                              {zero, index})};
}

/// A loop over the slots: `body(index, next)` emits the code of one slot,
/// branching to `next` to go on; after the last slot, control reaches
/// `exhausted`.
void emitSlotLoop(IRBuilder<> &b, BasicBlock *exhausted,
                  function_ref<void(Value *, BasicBlock *)> body) {
  Function *function = b.GetInsertBlock()->getParent();
  LLVMContext &context = function->getContext();
  BasicBlock *entry = b.GetInsertBlock();
  auto *header = BasicBlock::Create(context, "slot", function);
  auto *next = BasicBlock::Create(context, "next", function);
  b.CreateBr(header);
  b.SetInsertPoint(header);
  PHINode *index = b.CreatePHI(b.getInt64Ty(), 2, "index");
  index->addIncoming(b.getInt64(0), entry);
  body(index, next);
  b.SetInsertPoint(next);
  Value *following = b.CreateAdd(index, b.getInt64(1));
  index->addIncoming(following, next);
  b.CreateCondBr(b.CreateICmpULT(following, b.getInt64(kSlots)), header,
                 exhausted);
}

/// ptr cached_malloc(i64 n): the first cached block of n to n + n/8 + 4 KiB
/// usable bytes, else malloc(n).
Function *createCachedMalloc(Module &module, const Cache &cache,
                             FunctionCallee malloc) {
  LLVMContext &context = module.getContext();
  IRBuilder<> b(context);
  auto *type = FunctionType::get(b.getPtrTy(), {b.getInt64Ty()}, false);
  Function *function = Function::Create(type, GlobalValue::InternalLinkage,
                                        "swin.cached_malloc", module);
  Value *n = function->getArg(0);
  auto *entry = BasicBlock::Create(context, "entry", function);
  auto *miss = BasicBlock::Create(context, "miss", function);
  b.SetInsertPoint(entry);
  Value *large = b.CreateICmpUGE(n, b.getInt64(kMinCachedBytes));
  auto *search = BasicBlock::Create(context, "search", function);
  b.CreateCondBr(large, search, miss);
  b.SetInsertPoint(search);
  Value *most =
      b.CreateAdd(n, b.CreateAdd(b.CreateLShr(n, 3), b.getInt64(4096)));
  emitSlotLoop(b, miss, [&](Value *index, BasicBlock *next) {
    auto [blockAddress, sizeAddress] = slotAddresses(b, cache, index);
    Value *block = b.CreateLoad(b.getPtrTy(), blockAddress);
    Value *size = b.CreateLoad(b.getInt64Ty(), sizeAddress);
    Value *fits = b.CreateAnd(
        b.CreateIsNotNull(block),
        b.CreateAnd(b.CreateICmpUGE(size, n), b.CreateICmpULE(size, most)));
    auto *hit = BasicBlock::Create(context, "hit", function);
    b.CreateCondBr(fits, hit, next);
    b.SetInsertPoint(hit);
    b.CreateStore(Constant::getNullValue(b.getPtrTy()), blockAddress);
    Value *bytes = b.CreateLoad(b.getInt64Ty(), cache.bytes);
    b.CreateStore(b.CreateSub(bytes, size), cache.bytes);
    b.CreateRet(block);
  });
  b.SetInsertPoint(miss);
  b.CreateRet(b.CreateCall(malloc, {n}));
  return function;
}

/// void cached_free(ptr p): keeps a large p in an empty slot while the cache
/// holds less than kMaxCachedBytes, else free(p).
Function *createCachedFree(Module &module, const Cache &cache,
                           FunctionCallee free, FunctionCallee usableSize) {
  LLVMContext &context = module.getContext();
  IRBuilder<> b(context);
  auto *type = FunctionType::get(b.getVoidTy(), {b.getPtrTy()}, false);
  Function *function = Function::Create(type, GlobalValue::InternalLinkage,
                                        "swin.cached_free", module);
  Value *block = function->getArg(0);
  auto *entry = BasicBlock::Create(context, "entry", function);
  auto *release = BasicBlock::Create(context, "release", function);
  auto *measure = BasicBlock::Create(context, "measure", function);
  auto *search = BasicBlock::Create(context, "search", function);
  b.SetInsertPoint(entry);
  b.CreateCondBr(b.CreateIsNull(block), release, measure);
  b.SetInsertPoint(measure);
  Value *size = b.CreateCall(usableSize, {block});
  Value *bytes = b.CreateLoad(b.getInt64Ty(), cache.bytes);
  Value *keep = b.CreateAnd(
      b.CreateICmpUGE(size, b.getInt64(kMinCachedBytes)),
      b.CreateICmpULE(b.CreateAdd(bytes, size), b.getInt64(kMaxCachedBytes)));
  b.CreateCondBr(keep, search, release);
  b.SetInsertPoint(search);
  emitSlotLoop(b, release, [&](Value *index, BasicBlock *next) {
    auto [blockAddress, sizeAddress] = slotAddresses(b, cache, index);
    Value *empty = b.CreateIsNull(b.CreateLoad(b.getPtrTy(), blockAddress));
    auto *store = BasicBlock::Create(context, "store", function);
    b.CreateCondBr(empty, store, next);
    b.SetInsertPoint(store);
    b.CreateStore(block, blockAddress);
    b.CreateStore(size, sizeAddress);
    b.CreateStore(b.CreateAdd(bytes, size), cache.bytes);
    b.CreateRetVoid();
  });
  b.SetInsertPoint(release);
  b.CreateCall(free, {block});
  b.CreateRetVoid();
  return function;
}
} // namespace

void mlir::rpe::cacheLargeAllocations(llvm::Module &module) {
  llvm::Function *malloc = module.getFunction("malloc");
  llvm::Function *free = module.getFunction("free");
  if (!malloc || !free || malloc->use_empty())
    return;
  llvm::LLVMContext &context = module.getContext();
  llvm::Type *i64 = llvm::Type::getInt64Ty(context);
  llvm::Type *ptr = llvm::PointerType::getUnqual(context);
  Cache cache{
      createThreadLocal(module, llvm::ArrayType::get(ptr, kSlots),
                        "swin.cache.blocks"),
      createThreadLocal(module, llvm::ArrayType::get(i64, kSlots),
                        "swin.cache.sizes"),
      createThreadLocal(module, i64, "swin.cache.bytes"),
  };
  FunctionCallee usableSize = module.getOrInsertFunction(
      "malloc_usable_size", llvm::FunctionType::get(i64, {ptr}, false));
  // Created first, so that the replacement below leaves their own calls of
  // malloc and free alone.
  SmallVector<CallBase *> mallocCalls, freeCalls;
  for (User *user : malloc->users())
    if (auto *call = dyn_cast<CallBase>(user))
      if (call->getCalledOperand() == malloc)
        mallocCalls.push_back(call);
  for (User *user : free->users())
    if (auto *call = dyn_cast<CallBase>(user))
      if (call->getCalledOperand() == free)
        freeCalls.push_back(call);
  llvm::Function *cachedMalloc = createCachedMalloc(module, cache, malloc);
  llvm::Function *cachedFree =
      createCachedFree(module, cache, free, usableSize);
  for (CallBase *call : mallocCalls)
    call->setCalledFunction(cachedMalloc);
  for (CallBase *call : freeCalls)
    call->setCalledFunction(cachedFree);
}
