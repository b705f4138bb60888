# evo_embed(<target> <namespace> <function> FILES f1 f2 ...)
# Generates a .cpp defining
#   std::span<const evodispatch::EmbeddedFile> <namespace>::<function>()
# holding the text of each file under its base name, and adds it to <target>.
# Used for the Lua policies, the workloads and the simulator profiles, so the
# installed binary needs no data directory.
function(evo_embed target ns fn)
  cmake_parse_arguments(E "" "" "FILES" ${ARGN})
  set(out "${CMAKE_CURRENT_BINARY_DIR}/embedded_${fn}.cpp")
  set(body "#include <evodispatch/heuristics/embedded.hpp>\nnamespace ${ns} {\nnamespace {\nconst evodispatch::EmbeddedFile kFiles[] = {\n")
  foreach(f IN LISTS E_FILES)
    get_filename_component(abs "${f}" ABSOLUTE)
    get_filename_component(name "${f}" NAME)
    file(READ "${abs}" text)
    string(FIND "${text}" ")EVOEMBED\"" clash)
    if(NOT clash EQUAL -1)
      message(FATAL_ERROR "${abs} contains the embed delimiter")
    endif()
    string(APPEND body "  {\"${name}\", R\"EVOEMBED(${text})EVOEMBED\"},\n")
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${abs}")
  endforeach()
  string(APPEND body "};\n}  // namespace\nstd::span<const evodispatch::EmbeddedFile> ${fn}() { return kFiles; }\n}  // namespace ${ns}\n")
  # Written only when changed, so an unchanged file does not trigger a rebuild.
  file(WRITE "${out}.tmp" "${body}")
  configure_file("${out}.tmp" "${out}" COPYONLY)
  target_sources(${target} PRIVATE "${out}")
endfunction()

# evo_module(<target> PUBLIC deps... PRIVATE deps...)
# One static library per folder: sources in src/, exported headers in include/.
# A folder with no sources yet is an INTERFACE library so the tree always configures.
function(evo_module target)
  cmake_parse_arguments(M "" "" "PUBLIC;PRIVATE" ${ARGN})
  file(GLOB _src CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/src/*.cpp)
  if(_src)
    add_library(${target} STATIC ${_src})
    target_include_directories(${target} PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/include)
    target_link_libraries(${target} PUBLIC ${M_PUBLIC} PRIVATE ${M_PRIVATE})
  else()
    add_library(${target} INTERFACE)
    target_include_directories(${target} INTERFACE ${CMAKE_CURRENT_SOURCE_DIR}/include)
    target_link_libraries(${target} INTERFACE ${M_PUBLIC})
  endif()
endfunction()
