/* SPDX-License-Identifier: MIT */
/*
 * wire/rpc_list.h - every RPC a Mooncake master registers, as an X-macro.
 *
 * One line per RPC name of the newest supported Mooncake revision; the
 * per-revision tables (function ids, type hashes, codecs) are indexed by
 * the enum this list generates, so a name's position is its identity
 * everywhere in the server (dispatch, metrics, docs). Names are the
 * upstream method names of mooncake::WrappedMasterService.
 */
#ifndef KVF_SERVER_RPC_LIST_H
#define KVF_SERVER_RPC_LIST_H

#define KVF_RPC_LIST(X) \
	X(BatchEvictDiskReplica) \
	X(BatchExistKey) \
	X(BatchGetReplicaList) \
	X(BatchPutEnd) \
	X(BatchPutRevoke) \
	X(BatchPutStart) \
	X(BatchQueryIp) \
	X(BatchRemove) \
	X(BatchReplicaClear) \
	X(BatchUpsertEnd) \
	X(BatchUpsertRevoke) \
	X(BatchUpsertStart) \
	X(CalcCacheStats) \
	X(CopyEnd) \
	X(CopyRevoke) \
	X(CopyStart) \
	X(CreateCopyTask) \
	X(CreateMoveTask) \
	X(DynamicReplicaCopyEnd) \
	X(DynamicReplicaCopyRevoke) \
	X(DynamicReplicaCopyStart) \
	X(EvictDiskReplica) \
	X(ExistKey) \
	X(FetchTasks) \
	X(GetAllNoFSegments) \
	X(GetFsdir) \
	X(GetNoFSegmentsByName) \
	X(GetReplicaList) \
	X(GetReplicaListByRegex) \
	X(GetStorageConfig) \
	X(GracefulUnmountSegment) \
	X(MarkTaskToComplete) \
	X(MountLocalDiskSegment) \
	X(MountNoFSegment) \
	X(MountSegment) \
	X(MoveEnd) \
	X(MoveRevoke) \
	X(MoveStart) \
	X(NotifyOffloadSuccess) \
	X(NotifyPromotionFailure) \
	X(NotifyPromotionSuccess) \
	X(OffloadObjectHeartbeat) \
	X(Ping) \
	X(PollRemoveAll) \
	X(PromotionAllocStart) \
	X(PromotionObjectHeartbeat) \
	X(PutEnd) \
	X(PutRevoke) \
	X(PutStart) \
	X(QuerySegmentStatus) \
	X(QuerySegmentStatusById) \
	X(QueryTask) \
	X(ReMountNoFSegment) \
	X(ReMountSegment) \
	X(Remove) \
	X(RemoveAll) \
	X(RemoveByRegex) \
	X(ReportSsdCapacity) \
	X(ServiceReady) \
	X(UnmountLocalDiskSegment) \
	X(UnmountNoFSegment) \
	X(UnmountSegment) \
	X(UpsertEnd) \
	X(UpsertRevoke) \
	X(UpsertStart)

enum kvf_rpc {
#define KVF_RPC_ENUM(name) KVF_RPC_##name,
	KVF_RPC_LIST(KVF_RPC_ENUM)
#undef KVF_RPC_ENUM
	KVF_RPC__COUNT
};

#endif /* KVF_SERVER_RPC_LIST_H */
