# Every third-party dependency is a Debian package (scripts/install-deps.sh).
if(NOT DEFINED CUDAToolkit_ROOT AND EXISTS /usr/local/cuda)
  set(CUDAToolkit_ROOT /usr/local/cuda)
endif()
find_package(CUDAToolkit REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(CLI11 REQUIRED)
find_package(Threads REQUIRED)

if(EVO_STATIC_DEPS)
  set(_evo_lua_names liblua5.4.a)
  set(_evo_sqlite_names libsqlite3.a)
else()
  set(_evo_lua_names lua5.4 lua54)
  set(_evo_sqlite_names sqlite3)
endif()

find_path(LUA_INCLUDE_DIR lua.h PATH_SUFFIXES lua5.4 REQUIRED)
find_library(LUA_LIBRARY NAMES ${_evo_lua_names} REQUIRED)
add_library(evo::lua INTERFACE IMPORTED)
target_include_directories(evo::lua INTERFACE ${LUA_INCLUDE_DIR})
target_link_libraries(evo::lua INTERFACE ${LUA_LIBRARY} m ${CMAKE_DL_LIBS})

find_path(SQLITE3_INCLUDE_DIR sqlite3.h REQUIRED)
find_library(SQLITE3_LIBRARY NAMES ${_evo_sqlite_names} REQUIRED)
add_library(evo::sqlite3 INTERFACE IMPORTED)
target_include_directories(evo::sqlite3 INTERFACE ${SQLITE3_INCLUDE_DIR})
target_link_libraries(evo::sqlite3 INTERFACE ${SQLITE3_LIBRARY} Threads::Threads ${CMAKE_DL_LIBS})

# cudart is linked statically so the binary starts without an NVIDIA driver;
# a missing driver is then an ordinary "no GPU" answer from cudaGetDeviceCount.
# NVRTC is named by its file, not CUDA::nvrtc, whose imported target drags in the
# driver stub (libcuda.so): a binary that needs libcuda.so.1 does not start without a driver.
add_library(evo::cuda INTERFACE IMPORTED)
target_include_directories(evo::cuda INTERFACE ${CUDAToolkit_INCLUDE_DIRS})
target_link_libraries(evo::cuda INTERFACE CUDA::cudart_static ${CUDA_nvrtc_LIBRARY})
